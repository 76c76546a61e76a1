"""A bench measured on the chip says how the cost model's speedups compare with the measured ones."""

from __future__ import annotations

import pytest
from maxkernel_core.bench.metrics import TaskResult, model_vs_measured, spearman, suite_metrics


def _r(task: str, measured: float, estimated: float | None) -> TaskResult:
    return TaskResult(task, "correct", correct=True, speedup=measured, speedup_kind="measured",
                      estimated_speedup=estimated)


def test_spearman_ranks_with_ties_and_needs_three_pairs():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(0.866, abs=1e-3)
    assert spearman([1, 2], [2, 1]) is None and spearman([1, 1, 1], [1, 2, 3]) is None


def test_the_model_is_held_against_the_measured_tasks_only():
    results = [_r("a", 0.8, 2.2), _r("b", 2.3, 1.9), _r("c", 0.9, 1.1), _r("d", 1.2, None),
               TaskResult("e", "failed"), TaskResult("f", "correct", correct=True, speedup=1.5,
                                                     speedup_kind="estimated", estimated_speedup=1.5)]
    versus = model_vs_measured(results)
    assert versus["tasks"] == 3 and versus["direction_agrees"] == 1  # only b is called right
    assert versus["geomean_measured"] == pytest.approx((0.8 * 2.3 * 0.9) ** (1 / 3))
    assert versus["spearman"] == pytest.approx(-0.5)
    assert suite_metrics(results)["model_vs_measured"] == versus
    assert model_vs_measured([TaskResult("f", "correct", correct=True, speedup=1.5, speedup_kind="estimated")]) is None
