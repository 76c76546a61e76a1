"""``offline``: a compiler-style Pallas kernel generator that answers the planner, implementer and
debugger roles itself, with no API key and no network.

It analyses the reference's jaxpr at full size (``analysis.py``, ``attention/``),
picks a template (row-wise, matmul with fused epilogue, flash attention, a
batch fallback, and last the staged template that puts only the matmuls and
convolutions on kernels: ``staged.py``) or declines with the reason, chooses
block sizes with the TPU cost model (``space.py``), writes a readable,
shape-generic module (``templates.py``, ``flash.py``, the ``staged_*.py`` runtime),
and repairs compiler errors by moving
parameters (VMEM overflow: smaller blocks). It never emits canned code for a
task name.
"""
