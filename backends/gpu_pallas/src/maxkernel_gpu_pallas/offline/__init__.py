"""The offline synthesizer's GPU templates: Triton-lowered Pallas kernels written from the same reference
analysis as the TPU templates (``maxkernel_tpu_offline.synthesis.analyse_task``), with no model and no key."""
