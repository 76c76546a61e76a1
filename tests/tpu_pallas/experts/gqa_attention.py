"""Causal grouped-query attention (2p): q [B, S, Hq, D] and k, v [B, S, Hkv, D] go to head-major layout in
XLA (as the published Pallas GQA does), and the flash kernel reads each query head's kv head by index, without
repeating k and v (the kernel: flash_core.py)."""
# @include flash_core.py


def computation(q, k, v):
    group = q.shape[2] // k.shape[2]
    q, k, v = (x.transpose(0, 2, 1, 3) for x in (q, k, v))  # BSHD -> BHSD
    out = flash_attention(q, k, v, scale=q.shape[-1] ** -0.5, group=group)
    return out.transpose(0, 2, 1, 3)
