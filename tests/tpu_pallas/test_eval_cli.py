"""`maxkernel eval` as a user runs it: verdicts a person understands, exit codes, --json."""

from __future__ import annotations

import json

import pytest

from ..helpers import run_cli
from .conftest import KERNELS, TASKS, kernel_source

pytestmark = pytest.mark.slow


def test_honest_kernel_exit_0_and_readable(tmp_path):
    result = run_cli("eval", "--task", str(TASKS / "matmul_bias_gelu"), "--kernel",
                     str(KERNELS / "honest_matmul_bias_gelu.py"), env={"MAXKERNEL_HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("OK ") and "4 input sets match the reference in Pallas interpret mode on CPU" in out
    assert "proof_of_kernel" in out and "compiled for TPU v5 lite" in out
    assert "speed: not measured: no TPU attached" in out


def test_cheat_exit_1_json_record(tmp_path):
    result = run_cli("eval", "--task", "test_matmul", "--kernel", str(KERNELS / "cheat_jnp_outside_kernel.py"),
                     "--json", "--target", "v6e", env={"MAXKERNEL_HOME": str(tmp_path), "MAXKERNEL_TASKS_PATHS": str(TASKS)})
    assert result.returncode == 1, result.stderr
    record = json.loads(result.stdout)
    assert record["_record"] == "Evaluation" and record["status"] == "rejected" and record["target"] == "v6e"
    assert "outside pallas_call" in record["reason"]


def test_jaxbench_workload_through_the_cli(tmp_path):
    result = run_cli("eval", "--task", str(TASKS.parent / "tasks_jaxbench" / "softmax_workload.py"),
                     "--kernel", str(KERNELS / "honest_softmax.py"), "--json")
    record = json.loads(result.stdout)
    assert result.returncode == 0, record["reason"]
    sets = record["test"]["details"]["sets"]
    assert [s["how"] for s in sets] == ["task"] + [f"regenerated floats, rng {1000 + i}" for i in range(3)]


def test_usage_errors_exit_2_with_one_line(tmp_path):
    kernel = tmp_path / "k.py"
    kernel.write_text(kernel_source("honest_matmul.py"))
    missing = run_cli("eval", "--task", "no_such_task", "--kernel", str(kernel))
    assert missing.returncode == 2 and missing.stderr.startswith("Error: no task 'no_such_task'")
    assert len(missing.stderr.strip().splitlines()) == 1
    bad_target = run_cli("eval", "--task", str(TASKS / "matmul"), "--kernel", str(kernel), "--target", "v9")
    assert bad_target.returncode == 2 and "Traceback" not in bad_target.stderr
    assert "unknown TPU target 'v9': use one of v4, v5e, v5p, v6e, 7x" in bad_target.stderr


def test_a_binary_kernel_file_or_a_budget_below_one_is_one_line_exit_2(tmp_path):
    binary = tmp_path / "k.py"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    result = run_cli("eval", "--task", str(TASKS / "matmul"), "--kernel", str(binary))
    assert result.returncode == 2 and result.stderr.startswith(f"Error: kernel file {binary} is not UTF-8 text")
    assert len(result.stderr.strip().splitlines()) == 1
    for budget in ("-1", "0"):
        result = run_cli("run", "--task", str(TASKS / "matmul"), "--budget", budget, "--out", str(tmp_path / "o"),
                         env={"MAXKERNEL_HOME": str(tmp_path / "home")})
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("Error: config key 'run.budget' in --budget must be at least 1")
        assert len(result.stderr.strip().splitlines()) == 1
    if (tmp_path / "home" / "runs.db").exists():  # nothing stored for a run that never started
        from maxkernel_core.store import RunStore

        assert RunStore(tmp_path / "home" / "runs.db").list_runs(10) == []


def test_without_bubblewrap_it_says_so_in_one_line_and_records_the_fallback(tmp_path):
    result = run_cli("eval", "--task", str(TASKS / "rmsnorm"), "--kernel", str(KERNELS / "honest_rmsnorm.py"),
                     "--json", env={"PATH": str(tmp_path), "MAXKERNEL_HOME": str(tmp_path / "home")}, timeout=300)
    assert result.returncode == 0, result.stderr
    warning = [line for line in result.stderr.splitlines() if "weaker fallback sandbox" in line]
    assert len(warning) == 1 and "bubblewrap (bwrap) is not installed" in warning[0] and "daemon" in warning[0]
    assert json.loads(result.stdout)["details"]["sandbox"] == "fallback"
