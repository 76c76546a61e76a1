"""``maxkernel-tpu-offline``: the offline synthesizer's TPU templates, on the chip-neutral ``maxkernel_synthesis``.

From the neutral analysis of the reference it writes a TPU Pallas module: row-wise and matmul with a fused
epilogue (``templates.py``, GroupNorm's lane butterfly in ``group_reduce.py``), flash attention
(``flash.py``), the batch fallback, and its last resort, the staged template that puts only the matmuls and
convolutions on kernels (``staged.py`` and the ``staged_*.py`` runtime). It chooses block sizes with the TPU
cost model (``space.py``, ``liveness.py``, ``blocks.py``) and repairs compiler errors by moving parameters
(VMEM overflow: smaller blocks). It never emits canned code for a task name.
"""
