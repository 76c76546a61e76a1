"""Suite figures as KernelBench defines them; failures never count as 1x; estimates and measurements apart."""

from __future__ import annotations

import math

import pytest

from maxkernel_core.bench import TaskResult, suite_metrics


def ok(task, speedup, kind="estimated", roofline=None):
    return TaskResult(task, "correct", compiled=True, correct=True, proof_of_kernel=True, speedup=speedup,
                      speedup_kind=kind, roofline_fraction=roofline)


def failed(task, compiled=False):
    return TaskResult(task, "failed", "incorrect: max abs error 3.0", compiled=compiled)


def test_geomean_over_correct_tasks_only_and_failures_listed_apart():
    m = suite_metrics([ok("a", 2.0), ok("b", 0.5), ok("c", 8.0), failed("d", compiled=True)])
    (speed,) = m["speed"]
    assert speed["kind"] == "estimated" and speed["tasks_with_speedup"] == 3
    assert speed["geomean_speedup"] == pytest.approx(2.0)  # (2 * 0.5 * 8) ** (1/3); d is not a 1x
    assert m["failures"] == [{"task": "d", "status": "failed", "reason": "incorrect: max abs error 3.0"}]
    assert (m["compiled"], m["correct"], m["compile_rate"], m["correctness_rate"]) == (4, 3, 1.0, 0.75)


def test_fast_p_is_a_share_of_all_tasks():
    results = [ok("a", 0.8), ok("b", 1.2), ok("c", 1.6), ok("d", 2.5), failed("e"), failed("f"), failed("g"), failed("h")]
    m = suite_metrics(results)
    fast = m["speed"][0]["fast_p"]
    assert m["fast_0"] == fast["0"] == 0.5
    assert (fast["1"], fast["1.5"], fast["2"]) == (3 / 8, 2 / 8, 1 / 8)


def test_fast_p_is_strictly_faster_than_p():
    assert suite_metrics([ok("a", 1.0)])["speed"][0]["fast_p"]["1"] == 0.0


def test_estimated_and_measured_speedups_are_never_pooled():
    m = suite_metrics([ok("a", 2.0, "estimated"), ok("b", 8.0, "measured"), ok("c", 2.0, "measured")])
    by_kind = {s["kind"]: s for s in m["speed"]}
    assert by_kind["estimated"]["geomean_speedup"] == pytest.approx(2.0)
    assert by_kind["measured"]["geomean_speedup"] == pytest.approx(4.0)
    assert by_kind["estimated"]["fast_p"]["1.5"] == pytest.approx(1 / 3)  # still a share of all three tasks


def test_a_correct_task_without_a_speed_figure_counts_for_fast_0_only():
    m = suite_metrics([TaskResult("a", "correct", correct=True, compiled=True), failed("b")])
    assert m["fast_0"] == 0.5 and m["speed"] == []


def test_empty_suite_has_no_figures():
    m = suite_metrics([])
    assert m["tasks"] == 0 and m["speed"] == [] and m["fast_0"] == 0.0


def test_round_trip_of_a_task_result_ignores_unknown_keys():
    r = ok("a", 1.5, roofline=0.4)
    assert TaskResult.from_dict({**r.to_dict(), "from_a_newer_version": 1}) == r
    assert math.isclose(TaskResult.from_dict(r.to_dict()).speedup, 1.5)


def test_unverified_tasks_and_errors_are_counted_apart_never_as_correct():
    unverified = TaskResult("u", "unverified", "correctness was not checked: no small size", compiled=True,
                            proof_of_kernel=True)
    error = TaskResult("e", "error", "the task cannot load: a PyTorch module")
    m = suite_metrics([ok("a", 2.0), unverified, error, failed("f")])
    assert (m["correct"], m["unverified"], m["errors"], m["correctness_rate"]) == (1, 1, 1, 0.25)
    assert {f["task"]: f["status"] for f in m["failures"]} == {"u": "unverified", "e": "error", "f": "failed"}


def test_at_suite_scale_the_report_groups_the_reasons_most_common_first():
    from pathlib import Path

    from maxkernel_core.bench import BenchConfig, BenchResult
    from maxkernel_core.bench.report import markdown

    results = [ok("a", 1.0)]
    results += [TaskResult(f"c{i}", "failed", f"no verified kernel; last verdict compile_error: TPU compile for v5e "
                           f"failed: Unimplemented primitive in Pallas TPU lowering for tc: cumsum{i % 1}. Please file")
                for i in range(7)]
    results += [TaskResult(f"s{i}", "error", f"the offline synthesizer has no template for task s{i}: reduce_window "
                           f"works on a shape ({i}, 128)") for i in range(4)]
    results.append(TaskResult("u", "unverified", "correctness was not checked: no small size"))
    text = markdown(BenchResult("bench-x", BenchConfig("suite"), results, suite_metrics(results), Path("."), "v6e"))
    why = text.split("## Why, most common first")[1].split("## Tasks without")[0]
    rows = [line for line in why.splitlines() if line.startswith("| ") and not line.startswith("| tasks")]
    assert rows[0] == ("| 7 | failed | compile_error: TPU compile for v5e failed: Unimplemented primitive in Pallas "
                       "TPU lowering for tc: cumsum0 |")
    assert rows[1] == "| 4 | error | the offline synthesizer has no template for task T: reduce_window works on a shape |"
    assert "1 unverified (compiled and proven" in text and "4 could not load or run" in text
