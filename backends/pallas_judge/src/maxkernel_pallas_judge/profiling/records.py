"""What a cost model says of a candidate, as records every Pallas backend's model fills the same way.

A chip's model (the TPU's calibrated model, the GPU's roofline) returns a
``CostEstimate`` of ``KernelCost`` records; the verdict, the reports and the
search read only these. ``vmem_bytes`` and ``vmem_limit_bytes`` are the
on-chip memory a kernel's blocks take and its limit (VMEM on a TPU, shared
memory on a GPU).
"""

from __future__ import annotations

import json
from typing import Any

from attrs import define, field
from maxkernel_core import KernelTime, ModelBreakdown, OperandTraffic, OpTime, from_json, to_json


@define
class OperandCost:
    role: str
    index: int
    block_shape: list[int]
    dtype: str
    hbm_bytes: int
    array_bytes: int
    transfers: int
    vmem_bytes: int
    depends_on: list[bool] | None

    @property
    def refetch(self) -> float:
        """Bytes moved over bytes of the array: 1.0 means each element crosses HBM once."""
        return self.hbm_bytes / self.array_bytes if self.array_bytes else 0.0


@define
class KernelCost:
    name: str
    grid: list[int]
    steps: int
    operands: list[OperandCost]
    hbm_bytes: int
    flops: float
    mxu_flops_padded: float
    elementwise: float
    transcendental: float
    vmem_bytes: int
    vmem_limit_bytes: int
    cores_used: int
    memory_s: float
    compute_s: float
    overhead_s: float
    seconds: float
    ideal_compute_s: float = 0.0  # unpadded FLOPs at the MXU's rate for their dtype
    dots: list[dict[str, Any]] = field(factory=list)
    mxu_s: float = 0.0  # the units' own times, before they overlap into compute_s
    vpu_s: float = 0.0
    eup_s: float = 0.0
    fill_s: float = 0.0  # the first step's copies in and the last step's copies out, which overlap nothing

    @property
    def bound(self) -> str:
        parts = {"memory": self.memory_s, "compute": self.compute_s, "step overhead": self.overhead_s}
        return max(parts, key=parts.get)

    @property
    def compute_unit(self) -> str:
        """The busiest compute unit: mxu, vpu or eup."""
        parts = {"mxu": self.mxu_s, "vpu": self.vpu_s, "eup": self.eup_s}
        return max(parts, key=parts.get)


@define
class CostEstimate:
    """The model's view of a whole candidate (several kernels add up)."""

    target: str
    kernels: list[KernelCost]
    seconds: float
    hbm_bytes: int
    flops: float
    ideal_seconds: float
    chip: dict[str, Any]
    estimated: bool = True
    #: Time of the code around the kernels (transposes, im2col, norms left to XLA), included in ``seconds``.
    glue_seconds: float = 0.0
    #: which set of model parameters made this estimate (shipped, or the user's own calibration)
    params_source: str = ""
    #: the costliest ops of the code around the kernels (from the compiled candidate)
    glue_ops: list[OpTime] = field(factory=list)

    @property
    def bound(self) -> str:
        return max(self.kernels, key=lambda k: k.seconds).bound if self.kernels else "none"

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.hbm_bytes if self.hbm_bytes else float("inf")

    @property
    def roofline_fraction(self) -> float:
        return min(self.ideal_seconds / self.seconds, 1.0) if self.seconds else 0.0

    @property
    def fits_vmem(self) -> bool:
        return all(k.vmem_bytes <= k.vmem_limit_bytes for k in self.kernels)

    def dominant_operand(self) -> tuple[KernelCost, OperandCost] | None:
        pairs = [(k, o) for k in self.kernels for o in k.operands]
        return max(pairs, key=lambda p: p[1].hbm_bytes) if pairs else None


def matmul_flops_per_step(desc: dict[str, Any]) -> float:
    """The matmul FLOPs of one grid step of a described kernel, every ``pl.when`` arm counted (the judge's rule)."""
    return sum(2.0 * d["m"] * d["n"] * d["k"] * d["batch"] * d["count"] for d in desc["body"]["dots"])


def as_breakdown(est: CostEstimate) -> ModelBreakdown:
    """The estimate taken apart, as the typed record a ``Profile`` carries (``Profile.model``), read back the way
    the run store will read it: its numbers came from the candidate's program, and one the store could not read
    back (a grid axis of no size, say) raises here, in the judge's guard, and the verdict has no estimate."""
    made = ModelBreakdown(
        est.target, est.seconds, est.bound, est.hbm_bytes, est.flops,
        tuple(KernelTime(
            k.name, tuple(k.grid), k.steps, k.seconds, k.bound, k.memory_s, k.compute_s, k.overhead_s, k.fill_s,
            k.mxu_s, k.vpu_s, k.eup_s, k.compute_unit, k.hbm_bytes, k.flops, k.mxu_flops_padded, k.vmem_bytes,
            k.vmem_limit_bytes, k.cores_used,
            tuple(OperandTraffic(o.role, o.index, tuple(o.block_shape), o.dtype, o.hbm_bytes, o.transfers, o.refetch,
                                 o.vmem_bytes) for o in k.operands))
            for k in est.kernels),
        glue_seconds=est.glue_seconds, glue_ops=tuple(est.glue_ops), params_source=est.params_source,
        chip=dict(est.chip))
    return from_json(json.dumps(to_json(made)), ModelBreakdown)


def precision_note(precision: dict[str, Any] | None) -> str:
    """Where an f32 task's tolerance needs more than XLA's default matmul precision, in a sentence: XLA's reference
    is timed and estimated as jax.jit runs it (one bf16 pass per f32 matmul on a TPU), and would not itself pass
    the task's check at that precision."""
    if not isinstance(precision, dict) or precision.get("precision") in (None, "", "default"):
        return ""  # the default passes the task's check: nothing to explain
    at = precision.get("estimated_at", precision["precision"])
    return (f"XLA's reference runs its matmuls at {at} precision, as jax.jit does; the task's tolerance needs "
            f"{precision['precision']}" + (f" ({precision['why']})" if precision.get("why") else "") + ".")
