"""Causal flash attention (1p), as the Pallas TPU flash-attention kernels do it (the kernel: flash_core.py)."""
# @include flash_core.py


def computation(q, k, v):
    return flash_attention(q, k, v, scale=q.shape[-1] ** -0.5)
