"""bench --compare: one side-by-side report of the suite run once per value."""

from pathlib import Path

import pytest

from maxkernel_core.bench.compare import comparison, html_page, markdown, parse_compare
from maxkernel_core.bench.metrics import TaskResult, suite_metrics
from maxkernel_core.bench.runner import BenchConfig, BenchResult
from maxkernel_core.errors import ConfigError

from ..helpers import run_cli


def bench(results):
    return BenchResult("bench-x", BenchConfig("suite"), results, suite_metrics(results), Path("."), "v6e")


def correct(task, speedup, evaluations=2):
    return TaskResult(task, "correct", correct=True, compiled=True, speedup=speedup, speedup_kind="estimated",
                      evaluations=evaluations)


def test_parse_compare_takes_one_key_and_two_values_or_says_how():
    assert parse_compare("strategy=auto,graph") == ("strategy", ["auto", "graph"])
    assert parse_compare("budget=2, 4") == ("budget", [2, 4])
    for bad in ("strategy", "colour=red,blue", "strategy=auto", "budget=two,three", "strategy=auto,auto"):
        with pytest.raises(ConfigError, match="--compare"):
            parse_compare(bad)


def test_the_side_by_side_report_counts_wins_rates_and_spend():
    auto = bench([correct("a", 1.2), correct("b", 0.5), TaskResult("c", "failed", evaluations=3)])
    graph = bench([correct("a", 1.205, 5), correct("b", 0.9, 5), correct("c", 2.0, 5)])
    doc = comparison("strategy", [("auto", auto), ("graph", graph)])
    assert [t["winner"] for t in doc["tasks"]] == ["tie", "strategy=graph", "strategy=graph"]
    assert doc["wins"] == {"strategy=auto": 0, "strategy=graph": 2}
    auto_row, graph_row = doc["summary"]
    assert auto_row["correctness_rate"] == pytest.approx(2 / 3) and graph_row["correctness_rate"] == 1.0
    assert (auto_row["evaluations"], graph_row["evaluations"]) == (7, 15)
    assert graph_row["geomean_speedup"] == pytest.approx((1.205 * 0.9 * 2.0) ** (1 / 3))
    text = markdown(doc)
    assert "| c | failed | 2.00x | strategy=graph |" in text and "estimated" in text
    assert "<script>" not in html_page(comparison("model", [("<script>", auto), ("b", graph)]))


def test_compare_refuses_resume_and_kernels_in_one_line(tmp_path):
    result = run_cli("bench", "--suite", str(tmp_path), "--compare", "strategy=auto,graph", "--resume", "bench-1",
                     env={"MAXKERNEL_HOME": str(tmp_path / "home")})
    assert result.returncode == 2 and "--compare runs a strategy per value" in result.stderr


def test_the_benchs_backend_reaches_every_tasks_settings_and_is_stored_with_it():
    """``bench --backend gpu_pallas --target h100``: each task runs on that backend (and a resume keeps it)."""
    from attrs import asdict
    from maxkernel_core.bench.runner import task_settings
    from maxkernel_core.config import Settings

    config = BenchConfig("jaxbench", backend="gpu_pallas", target="h100")
    settings = task_settings(Settings(), config)
    assert (settings.run.backend, settings.run.target) == ("gpu_pallas", "h100")
    assert BenchConfig(**asdict(config)) == config  # the stored config, as --resume reads it back
    assert task_settings(Settings(), BenchConfig("jaxbench")).run.backend == Settings().run.backend
