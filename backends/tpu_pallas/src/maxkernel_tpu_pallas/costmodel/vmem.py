"""How much of a kernel's scoped VMEM limit its blocks may take: the fit rule the judge and generators share."""

from __future__ import annotations

#: Share of a kernel's scoped VMEM limit its blocks may take: Mosaic keeps internal scratch beside them,
#: so blocks that take the whole limit fail to compile (8p's 1024x4096 by 4096x2048 bf16 point: 64.0 of
#: 64 MiB), while 57 of 64 MiB compile (the full-row f32 GEMM epilogues, 21k and others).
VMEM_HEADROOM = 15 / 16


def fits_vmem(est) -> bool:
    """Whether every kernel of a ``CostEstimate`` leaves Mosaic its headroom under the kernel's scoped limit."""
    return all(k.vmem_bytes <= VMEM_HEADROOM * k.vmem_limit_bytes for k in est.kernels)
