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
    #: where the speedup is measured, the cost model's estimate of it for the same kernel (how wrong the model is)
    estimated_speedup: float | None = None
    #: what a measured time achieves for the task's work (TFLOP/s); None for estimates
    tflops: float | None = None

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
        "model_vs_measured": model_vs_measured(results),
        "failures": [{"task": r.task_id, "status": r.status, "reason": r.reason} for r in results if not r.correct],
        "evaluations": sum(r.evaluations for r in results),
        "llm_calls": sum(r.llm_calls for r in results),
        "tokens": sum(r.tokens for r in results),
        "cost_usd": (sum(r.cost_usd for r in results if r.cost_usd) if any(r.cost_usd for r in results) else None),
        "wall_s": sum(r.wall_s for r in results),
    }


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):  # ties share their mean rank
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(a: list[float], b: list[float]) -> float | None:
    """Spearman's rank correlation (None under 3 pairs or with no spread)."""
    if len(a) < 3:
        return None
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va, vb = sum((x - ma) ** 2 for x in ra), sum((y - mb) ** 2 for y in rb)
    return cov / math.sqrt(va * vb) if va and vb else None


def model_vs_measured(results: list[TaskResult]) -> dict[str, Any] | None:
    """How the cost model's speedups compare with the measured ones over the tasks that have both: the rank
    correlation, the geometric means side by side, and how often the direction (faster or slower) agrees."""
    both = [r for r in results if r.correct and r.speedup_kind == "measured" and r.speedup and r.estimated_speedup]
    if not both:
        return None
    measured, estimated = [r.speedup for r in both], [r.estimated_speedup for r in both]
    return {"tasks": len(both), "spearman": spearman(estimated, measured),
            "geomean_measured": geomean(measured), "geomean_estimated": geomean(estimated),
            "direction_agrees": sum((e >= 1) == (m >= 1) for e, m in zip(estimated, measured, strict=True))}
