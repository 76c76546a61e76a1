"""The speed model of a compiled XLA program: the reference, or the code around a candidate's kernels.

Each op ``hlo_program.py`` lists is one launch on the TensorCore, costed by the
same unit rule as a Pallas kernel's step (``units.py``): its HBM bytes overlap
its compute, its compute is the busiest of MXU, VPU and EUP, and it pays a
launch overhead; a Mosaic kernel XLA wrote pays its grid steps too; an op in a
loop runs once per trip. The sum is the program's estimated time: an estimate
of the same kind as a candidate's, never a measurement.
"""

from __future__ import annotations

from typing import Any

from attrs import asdict, frozen
from maxkernel_core import OpTime

from .units import compute_seconds, eup_rate, hbm_seconds, mxu_rate, padded_matmul_flops, passes_for, vpu_rate


@frozen
class ProgramEstimate:
    seconds: float
    ops: list[OpTime]
    notes: list[str]
    params_source: str

    @property
    def flops(self) -> float:
        return sum(o.flops * o.trips for o in self.ops)

    @property
    def hbm_bytes(self) -> float:
        return sum(o.hbm_bytes * o.trips for o in self.ops)

    def top(self, n: int = 8) -> list[OpTime]:
        return sorted(self.ops, key=lambda o: -o.seconds)[:n]

    def as_dict(self, top: int = 12) -> dict[str, Any]:
        return {"estimated": True, "seconds": self.seconds, "flops": self.flops, "hbm_bytes": self.hbm_bytes,
                "ops": len(self.ops), "launches": sum(o.trips for o in self.ops), "notes": self.notes,
                "params_source": self.params_source, "top_ops": [asdict(o) for o in self.top(top)]}


def op_cost(op: dict[str, Any], chip: dict[str, Any], params) -> OpTime:
    """One op of a described program, every trip of it."""
    mxu_s = flops = 0.0
    default_f32 = None if op.get("kernel") else 1.0  # XLA's default f32 matmul is one bf16 pass
    for dot in op["dots"]:
        times = dot["count"] * dot.get("batch", 1)
        flops += 2.0 * dot["m"] * dot["n"] * dot["k"] * times
        passes = passes_for(dot["dtype"], dot.get("precision"), params, default_f32=default_f32)
        padded = padded_matmul_flops(dot["m"], dot["n"], dot["k"], chip, params) * times
        mxu_s += padded * passes / mxu_rate(dot["dtype"], chip, params)
    vpu_s = op["elementwise"] / vpu_rate(chip, params)
    eup_s = op["transcendental"] / eup_rate(chip, params)
    compute = compute_seconds(mxu_s, vpu_s, eup_s, params)
    memory = hbm_seconds(op["hbm_bytes"], chip, params)
    # A scalar op of the loop control runs on the scalar unit, not as a kernel launch.
    launch = 0.0 if op.get("scalar") else params.xla_op_overhead_s
    overhead = launch + (op.get("steps", 1) * params.step_overhead_s if op.get("kernel") else 0.0)
    parts = {"memory": memory, "mxu": mxu_s, "vpu": vpu_s, "eup": eup_s, "overhead": overhead}
    one = max(memory, compute) + overhead
    return OpTime(op["name"], op["opcode"], op.get("label", ""), int(op["trips"]), float(op["hbm_bytes"]), flops,
                  memory, compute, overhead, one * op["trips"], max(parts, key=parts.get))


def estimate_program(described: dict[str, Any], chip: dict[str, Any], params) -> ProgramEstimate:
    """The estimated time of a described program (``hlo_program.describe_program``) on ``chip``."""
    ops = [op_cost(op, chip, params) for op in described["ops"]]
    return ProgramEstimate(sum(o.seconds for o in ops), ops, list(described.get("notes", [])), params.source)
