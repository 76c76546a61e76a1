"""The offline synthesizer's GPU templates (``maxkernel-gpu-offline``): Triton-lowered Pallas kernels written from
the chip-neutral reference analysis (``maxkernel_synthesis.task.analyse_task``), driven by the chip-neutral
offline roles (``maxkernel_synthesis.roles``), for the ``gpu_pallas`` backend; no model, no key."""
