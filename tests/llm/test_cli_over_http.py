"""`maxkernel run` and `maxkernel logs` as a user runs them against a local OpenAI-compatible server."""

from __future__ import annotations

import json
import re

import pytest
from maxkernel_core.store import RunStore

from ..agents.test_chain import PLAN_REPLY
from ..helpers import run_cli
from ..tpu_pallas.conftest import TASKS, kernel_source
from .fake_servers import error, text

pytestmark = pytest.mark.slow


def _config(tmp_path, server, retries: int = 1) -> dict[str, str]:
    (tmp_path / "maxkernel.toml").write_text(
        f'[run]\nprovider = "litellm"\nmodel = "openai/local-coder"\nbudget = 1\n'
        f'[llm]\napi_base = "{server.url}/v1"\ntimeout_s = 5\nmax_retries = {retries}\n'
        '[strategy.auto]\nmax_iterations = 1\nautotune_points = 1\n')
    return {"MAXKERNEL_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "sk-test-not-a-real-key-123456",
            "NO_COLOR": "1"}


def test_a_reply_without_code_is_asked_again_and_the_calls_can_be_browsed(openai_server, tmp_path):
    env = _config(tmp_path, openai_server)
    kernel = f"```python\n{kernel_source('honest_rmsnorm.py')}```"
    openai_server.enqueue(text(PLAN_REPLY), text("Use 32-row blocks; I will leave the code to you."), text(kernel))
    result = run_cli("run", "--task", str(TASKS / "rmsnorm"), "--out", str(tmp_path / "out"), "--json",
                     env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)  # one object on stdout; the live line and closing lines went to stderr
    assert data["best"]["status"] == "ok" and data["unusable_replies"] == 1 and data["exit_code"] == 0
    assert "1 model reply without usable code, each asked again" in result.stderr
    assert not re.search(r"\x1b\[[0-9;]*m", result.stderr)  # NO_COLOR: no colour or weight sequences
    run_id = data["run"]

    listed = run_cli("logs", run_id[4:10], env=env, cwd=tmp_path)  # a unique prefix, without "run-"
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.count("litellm:") == 3 and "implement" in listed.stdout and "plan" in listed.stdout
    calls = json.loads(run_cli("logs", run_id, "--json", "--role", "implement", env=env, cwd=tmp_path).stdout)
    assert len(calls) == 2 and calls[0]["role"] == "implement"
    retry, first = calls  # newest first
    assert "could not be used: the reply has no code block" in retry["messages"][-1]["content"]
    assert first["response"].startswith("Use 32-row blocks") and retry["latency_s"] is not None
    full = run_cli("logs", "--call", str(first["id"]), env=env, cwd=tmp_path).stdout
    assert "### user" in full and "### response" in full and "Use 32-row blocks" in full
    usage = run_cli("logs", run_id, "--usage", env=env, cwd=tmp_path).stdout
    assert "litellm:local-coder\timplement\t2\t0" in usage  # in a pipe: whole values, tab-separated
    everything = run_cli("logs", "-n", "0", "--json", env=env, cwd=tmp_path).stdout
    assert "sk-test-not-a-real-key" not in everything  # keys are never shown
    shown = run_cli("runs", "show", run_id[:9], env=env, cwd=tmp_path).stdout
    assert "LLM litellm:" in shown and f"maxkernel logs {run_id} --full" in shown


def test_a_provider_that_keeps_failing_exits_3_and_the_run_is_resumable(openai_server, tmp_path):
    env = _config(tmp_path, openai_server, retries=1)
    openai_server.enqueue(error(503), error(503))
    result = run_cli("run", "--task", str(TASKS / "rmsnorm"), "--out", str(tmp_path / "out"),
                     env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 3, result.stderr  # a service failure, not a usage error (2) or a failed kernel (1)
    assert "gave up after 2 attempts" in result.stderr and "Traceback" not in result.stderr
    (run,) = RunStore(tmp_path / "home" / "runs.db").list_runs()
    errors = json.loads(run_cli("logs", "--status", "error", "--json", env=env, cwd=tmp_path).stdout)
    assert len(errors) == 2 and all("TransientError" in e["error"] for e in errors)
    assert run.status == "failed"
