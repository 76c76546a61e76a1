"""The offline synthesizer's GPU templates (``maxkernel-gpu-offline``): Triton-lowered Pallas kernels written from
the same reference analysis as the TPU templates (``maxkernel_tpu_offline.synthesis.analyse_task``), driven by the
same offline roles, for the ``gpu_pallas`` backend; no model, no key."""
