"""``maxkernel-synthesis``: the offline synthesizer's chip-neutral base, a compiler-style reading of a reference.

It traces the reference's jaxpr at full size (``task.py``, ``ir.py``) and reads which template it is
(``analysis.py``: row-wise with the row rules of ``rows.py`` and ``groups.py``, matmul with a fused epilogue,
attention recognised by ``attention/``, a batch fallback, and a chip's own last resort) or declines with the
reason. ``emit.py`` and ``writing.py`` write the lines every chip's kernels share; ``roles.py`` answers the
planner, implementer, neighbours and debugger roles over any chip's ranked points; ``plugin.py`` registers the
provider that selects it. Each chip's templates are a thin package on top (``maxkernel_tpu_offline``,
``maxkernel_gpu_offline``), and neither imports the other. It never emits canned code for a task name.
"""
