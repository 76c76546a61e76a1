"""`maxkernel bench` end to end on the real TPU backend: ready kernels, a strategy, a kill and a resume."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from maxkernel_core.store import RunStore

from ..helpers import run_cli
from ..tpu_pallas.conftest import TASKS, kernel_source

pytestmark = pytest.mark.slow


@pytest.fixture
def suite(tmp_path):
    """The three test tasks plus one that cannot load."""
    root = tmp_path / "suite"
    shutil.copytree(TASKS, root)
    broken = root / "broken"
    broken.mkdir()
    (broken / "kernel_task.yaml").write_text("task_id: broken\natol: 0.1\nrtol: 0.1\n")
    (broken / "reference.py").write_text("def get_inputs(dtype=None):\n    return (), ()\n")  # no computation()
    return root


@pytest.fixture
def kernels(tmp_path):
    folder = tmp_path / "kernels"
    folder.mkdir()
    (folder / "test_matmul.py").write_text(kernel_source("cheat_no_pallas.py"))
    (folder / "test_rmsnorm").mkdir()
    (folder / "test_rmsnorm" / "kernel.py").write_text(kernel_source("honest_rmsnorm.py"))
    (folder / "test_matmul_bias_gelu.py").write_text(kernel_source("honest_matmul_bias_gelu.py"))
    return folder


def test_bench_of_ready_kernels_reports_every_task_and_goes_on_after_failures(tmp_path, suite, kernels):
    out = tmp_path / "out"
    result = run_cli("bench", "--suite", str(suite), "--kernels", str(kernels), "--out", str(out),
                     env={"MAXKERNEL_HOME": str(tmp_path / "home")}, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "4 tasks on v5e: 2 compiled (50%), 2 correct (50%)" in result.stdout
    assert "estimated by the cost model" in result.stdout and "not counted as 1x" in result.stdout
    data = json.loads((out / "results.json").read_text())
    by_id = {t["task_id"]: t for t in data["tasks"]}
    assert by_id["test_matmul_bias_gelu"]["correct"] and by_id["test_rmsnorm"]["correct"]
    assert by_id["test_rmsnorm"]["speedup_kind"] == "estimated" and by_id["test_rmsnorm"]["speedup"] > 0
    assert by_id["test_matmul"]["status"] == "failed" and not by_id["test_matmul"]["compiled"]
    assert "rejected" in by_id["test_matmul"]["reason"]
    assert by_id["broken"]["status"] == "error" and "defines no function computation()" in by_id["broken"]["reason"]
    m = data["metrics"]
    (speed,) = m["speed"]
    expected = (by_id["test_matmul_bias_gelu"]["speedup"] * by_id["test_rmsnorm"]["speedup"]) ** 0.5
    assert speed["geomean_speedup"] == pytest.approx(expected)
    assert m["fast_0"] == 0.5 and {f["task"] for f in m["failures"]} == {"test_matmul", "broken"}
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [r["task_id"] for r in rows] == ["broken", "test_matmul", "test_matmul_bias_gelu", "test_rmsnorm"]
    page = (out / "report.html").read_text()
    assert page.count("<svg") >= 2 and "estimated by the cost model" in page
    assert "## Tasks without a correct kernel" in (out / "report.md").read_text()


def test_killed_bench_resumes_without_redoing_finished_tasks(tmp_path, suite, kernels):
    home, out = tmp_path / "home", tmp_path / "out"
    args = ["bench", "--suite", str(suite), "--kernels", str(kernels), "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "maxkernel_core", *args], env={**os.environ, "MAXKERNEL_HOME": str(home)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline, store, bench = time.time() + 400, None, None
    while time.time() < deadline:  # kill once two tasks are finished
        time.sleep(0.3)
        if (home / "runs.db").exists():
            store = store or RunStore(home / "runs.db")
            benches = store.list_benches(1)
            if benches and sum(r["status"] == "done" for r in store.bench_tasks(benches[0]["id"]).values()) >= 2:
                bench = benches[0]["id"]
                break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert bench, "the bench never finished two tasks"
    finished = {t: r["run_id"] for t, r in store.bench_tasks(bench).items() if r["status"] in ("done", "error")}
    result = run_cli("bench", "--resume", bench, "--out", str(out), env={"MAXKERNEL_HOME": str(home)}, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = store.bench_tasks(bench)
    assert len(rows) == 4 and all(r["status"] in ("done", "error") for r in rows.values())
    assert {t: rows[t]["run_id"] for t in finished} == finished  # not redone
    kernel_runs = [r for r in store.list_runs(50) if r.strategy == "kernels"]
    assert len(kernel_runs) == 3  # one per loadable task, whatever the kill interrupted
    assert json.loads((out / "results.json").read_text())["metrics"]["correct"] == 2


def test_bench_with_a_strategy_runs_each_task_as_a_run(tmp_path):
    out = tmp_path / "out"
    result = run_cli("bench", "--suite", str(TASKS), "--tasks", "*rmsnorm", "--strategy", "auto", "--provider", "offline",
                     "--budget", "2", "--out", str(out), "--json", env={"MAXKERNEL_HOME": str(tmp_path / "home")},
                     timeout=600)
    assert result.returncode == 0, result.stderr
    assert "1 tasks on v5e: 1 compiled (100%), 1 correct (100%)" in result.stderr  # stdout carries the JSON
    (task,) = json.loads(result.stdout)["tasks"]
    assert json.loads(result.stdout) == json.loads((out / "results.json").read_text())
    assert 'href="tasks/test_rmsnorm/report.html"' in (out / "report.html").read_text()  # each task's own report
    assert (out / "tasks" / "test_rmsnorm" / "report.html").exists()
    assert task["task_id"] == "test_rmsnorm" and task["evaluations"] >= 1 and task["run_id"].startswith("run-")
    assert (out / "tasks" / "test_rmsnorm" / "kernel.py").exists() and task["kernel"].endswith("kernel.py")
    # (that the kernel file a run writes passes `maxkernel eval` on its own is test_run.py's; a bench writes it
    # with the same write_outputs)
    assert (out / "tasks" / "test_rmsnorm" / "kernel.py").read_text().startswith('"""Best kernel of maxkernel run')


def test_unknown_suite_and_empty_selection_are_one_line_errors(tmp_path):
    env = {"MAXKERNEL_HOME": str(tmp_path / "home")}
    result = run_cli("bench", "--suite", "nope", "--provider", "offline", env=env)
    assert result.returncode != 0
    assert "no suite 'nope': not a registered suite (jaxbench) and not a folder of tasks" in result.stderr
    result = run_cli("bench", "--suite", str(TASKS), "--tasks", "zzz*", "--provider", "offline", env=env)
    assert result.returncode != 0 and "matches --tasks 'zzz*'" in result.stderr
    result = run_cli("bench", "--suite", str(TASKS), "--provider", "gemini", env={**env, "GEMINI_API_KEY": "", "GOOGLE_API_KEY": ""})
    assert result.returncode != 0 and "GEMINI_API_KEY" in result.stderr and "Traceback" not in result.stderr
