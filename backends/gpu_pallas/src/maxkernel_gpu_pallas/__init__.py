"""maxkernel's Pallas backend for NVIDIA GPUs: the shared one-program judge with the GPU's Platform."""
