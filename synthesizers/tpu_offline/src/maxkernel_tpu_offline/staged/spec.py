"""What the staged template found in a reference: its matmuls and convolutions as the kernels see them."""

from __future__ import annotations

from attrs import define, field


@define(frozen=True)
class Matmul:
    """One matmul as the kernel sees it: (B, M, K) @ (B, K, N), run ``repeat`` times (inside loops)."""

    b: int
    m: int
    n: int
    k: int
    dtype: str
    repeat: int = 1
    source: str = "dot_general"
    #: What the kernel writes: the equation's output dtype (f32 under preferred_element_type), not the inputs'.
    out_dtype: str | None = None
    #: A convolution the runtime runs on its direct kernel: (N, padded spatial dims, C, window, O)
    direct: tuple[int, tuple[int, ...], int, tuple[int, ...], int] | None = None
    #: ... storing its output channels first (NCHW), the transpose after it fused (staged_conv)
    channels_first: bool = False
    #: ... on the few-channel kernel (staged_planar): channels first in and out, the shape in ``direct``
    planar: bool = False
    #: ... writing per-channel sums: its tail ends in a sum over the spatial dims
    reduces: bool = False
    #: A grouped matmul (staged_grouped): (M, K) rows, each group's by its own (K, N) of ``groups``
    groups: int = 0


@define
class StagedSpec:
    matmuls: list[Matmul]
    glue_share: float
    ops_left: dict[str, int] = field(factory=dict)
    #: The reference's matmul FLOPs, which size a kernel's run-time grid axis in the model
    matmul_flops: float = 0.0

    @property
    def dtype(self) -> str:
        return max(self.matmuls, key=lambda mm: mm.b * mm.m * mm.n * mm.k * mm.repeat).dtype
