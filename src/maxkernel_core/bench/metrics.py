"""Per-task results and the suite's figures, as KernelBench defines them.

Speedups are kept with their kind (``estimated`` by a cost model, or
``measured`` on the device) and the two are never pooled: a suite with both
gets each figure once per kind. A task without a correct kernel has no
speedup; it counts against the rates and fast_p and is listed among the
failures, never counted as 1x.
"""

from __future__ import annotations

import math
from typing import Any

from attrs import asdict, define

FAST_P = (0.0, 1.0, 1.5, 2.0)


@define
class TaskResult:
    """One task's outcome in a bench: what passed, how fast, what it cost."""

    task_id: str
    #: "correct" | "failed" | "unverified" (compiled and proven, but its outputs could not be checked) |
    #: "error" (the task or the run could not be completed)
    status: str
    reason: str = ""
    run_id: str | None = None
    compiled: bool = False
    correct: bool = False
    proof_of_kernel: bool = False
    speedup: float | None = None
    speedup_kind: str | None = None  # "estimated" | "measured"
    seconds: float | None = None
    reference_seconds: float | None = None
    roofline_fraction: float | None = None
    arithmetic_intensity: float | None = None
    evaluations: int = 0
    llm_calls: int = 0
    tokens: int = 0
    cost_usd: float | None = None
    wall_s: float = 0.0
    kernel: str | None = None
    notes: str = ""  # the task's own notes (e.g. an algebraic shortcut a kernel may take)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskResult:
        names = {a.name for a in cls.__attrs_attrs__}
        return cls(**{k: v for k, v in data.items() if k in names})


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _speed_figures(results: list[TaskResult], kind: str) -> dict[str, Any]:
    n = len(results)
    sped = [r for r in results if r.correct and r.speedup and r.speedup_kind == kind]
    return {
        "kind": kind,
        "tasks_with_speedup": len(sped),
        "geomean_speedup": geomean([r.speedup for r in sped]),
        # fast_p: the share of ALL tasks that are correct and more than p times faster.
        "fast_p": {f"{p:g}": (sum(1 for r in sped if r.speedup > p) / n if n else 0.0) for p in FAST_P},
        "median_roofline_fraction": _median([r.roofline_fraction for r in sped if r.roofline_fraction is not None]),
    }


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def suite_metrics(results: list[TaskResult]) -> dict[str, Any]:
    n = len(results)
    kinds = sorted({r.speedup_kind for r in results if r.correct and r.speedup_kind})
    correct = sum(r.correct for r in results)
    return {
        "tasks": n,
        "compiled": sum(r.compiled for r in results),
        "correct": correct,
        "compile_rate": sum(r.compiled for r in results) / n if n else 0.0,
        "correctness_rate": correct / n if n else 0.0,
        "unverified": sum(r.status == "unverified" for r in results),
        "errors": sum(r.status == "error" for r in results),
        # fast_0 in KernelBench's definition is the correctness rate, whatever the speed figures.
        "fast_0": correct / n if n else 0.0,
        "speed": [_speed_figures(results, kind) for kind in kinds],
        "failures": [{"task": r.task_id, "status": r.status, "reason": r.reason} for r in results if not r.correct],
        "evaluations": sum(r.evaluations for r in results),
        "llm_calls": sum(r.llm_calls for r in results),
        "tokens": sum(r.tokens for r in results),
        "cost_usd": (sum(r.cost_usd for r in results if r.cost_usd) if any(r.cost_usd for r in results) else None),
        "wall_s": sum(r.wall_s for r in results),
    }
