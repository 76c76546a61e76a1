"""What a user sees: the live line, ids by prefix, output in a pipe, NO_COLOR, -q/-v, tasks of one's own."""

from __future__ import annotations

import json
import re
import time

import pytest
from maxkernel_core import RunConfig
from maxkernel_core.activity import Activity
from maxkernel_core.cli.progress import RunProgress
from maxkernel_core.config import Settings
from maxkernel_core.errors import StoreError
from maxkernel_core.llm import LLMTimeout, RetryPolicy, complete
from maxkernel_core.store import RunStore
from maxkernel_core.testing import FakeLLMProvider

from ..helpers import run_cli

SGR = re.compile(r"\x1b\[[0-9;]*m")  # colour and weight escape sequences


def test_the_live_line_shows_what_is_awaited_for_how_long_and_the_retry():
    settings = Settings()
    settings.run.budget = 8
    activity = Activity()
    progress = RunProgress(settings, activity)
    assert "0:00: 0/8 evaluations; no verified kernel yet; last: starting" in progress.render()
    token = activity.begin("waiting for fake:m (plan role)", max_retries=5)
    activity.retrying(token, 2, "LLMTimeout")
    line = progress.render()
    assert "now: waiting for fake:m (plan role) 0 s (retry 2 of 5 after LLMTimeout)" in line
    activity.end(token)
    settings.run.budget = None
    assert "0 evaluations" in progress.render()
    progress.n = 1
    assert "1 evaluation;" in progress.render()  # singular


def test_a_retry_is_reported_before_its_wait():
    fake = FakeLLMProvider().enqueue(LLMTimeout("read timed out"), "fine")
    seen = []
    from maxkernel_core import LLMMessage, LLMRequest

    reply = complete(fake, LLMRequest((LLMMessage("user", "hi"),)), policy=RetryPolicy(max_retries=3),
                     sleep=lambda s: seen.append(("slept", s)), on_retry=lambda n, err: seen.append((n, err)))
    assert reply.text == "fine" and seen[0] == (1, "LLMTimeout") and seen[1][0] == "slept"


def test_ids_by_unique_prefix(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    a = store.create_run(RunConfig("t"), run_id="run-abc111111111")
    store.create_run(RunConfig("t"), run_id="run-abc222222222")
    assert store.resolve_id("run", "abc1") == a == store.resolve_id("run", "run-abc1")
    assert store.get_run("abc11").id == a
    with pytest.raises(StoreError, match="'abc' is ambiguous: it starts run-abc111111111, run-abc222222222"):
        store.resolve_id("run", "abc")
    with pytest.raises(StoreError, match="no run 'zzz'"):
        store.resolve_id("run", "zzz")
    with pytest.raises(StoreError, match="no run '%'"):  # LIKE wildcards are not wildcards here
        store.resolve_id("run", "%")


def test_runs_list_in_a_pipe_prints_whole_ids(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    ids = [store.create_run(RunConfig(f"a_task_with_a_rather_long_name_{i}", "auto", "offline")) for i in range(2)]
    result = run_cli("runs", "list", env={"MAXKERNEL_HOME": str(tmp_path)})
    lines = result.stdout.splitlines()
    assert lines[0].split("\t")[:3] == ["run", "started", "status"]
    assert sorted(line.split("\t")[0] for line in lines[1:]) == sorted(ids)  # cut -f1 gives ids that work
    assert "a_task_with_a_rather_long_name_1" in result.stdout and "…" not in result.stdout
    ambiguous = run_cli("runs", "show", "run-", env={"MAXKERNEL_HOME": str(tmp_path)})
    assert ambiguous.returncode == 2 and "ambiguous" in ambiguous.stderr


def test_tasks_exits_non_zero_when_nothing_loads(tmp_path):
    (tmp_path / "empty").mkdir()
    result = run_cli("tasks", str(tmp_path / "empty"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "no task loads from" in result.stderr and "maxkernel new-task NAME" in result.stderr


@pytest.mark.slow
def test_new_task_writes_a_folder_that_runs_and_the_run_reports_quietly_or_verbosely(tmp_path):
    env = {"MAXKERNEL_HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path)}
    for name in ("norm10", "norm2"):
        made = run_cli("new-task", name, "--template", "rowwise", "--dir", str(tmp_path / "tasks"), env=env)
        assert made.returncode == 0, made.stderr
        assert f"Next: maxkernel run --task {tmp_path / 'tasks' / name}" in made.stdout
    yaml_file = tmp_path / "tasks" / "norm2" / "kernel_task.yaml"
    yaml_file.write_text(yaml_file.read_text().replace("atol: 0.0001", "atol: 1e-4"))  # YAML reads 1e-4 as a string
    listed = run_cli("tasks", str(tmp_path / "tasks"), env=env)
    rows = [line.split("\t") for line in listed.stdout.splitlines()[1:]]
    assert listed.returncode == 0 and [r[0] for r in rows] == ["norm2", "norm10"]  # natural order
    assert all(r[-1] == "ok" for r in rows)

    task = str(tmp_path / "tasks" / "norm2")
    quiet = run_cli("run", "--task", task, "--provider", "offline", "--budget", "1", "-q",
                    "--out", str(tmp_path / "out"), env=env, timeout=600)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.strip() == str(tmp_path / "out" / "kernel.py") and quiet.stderr == ""
    plain = run_cli("run", "--task", task, "--provider", "offline", "--budget", "1", "-v", "--out",
                    str(tmp_path / "out"), env={**env, "FORCE_COLOR": "1", "NO_COLOR": "1"}, timeout=600)
    assert plain.returncode == 0 and "-> ok" in plain.stderr
    assert not SGR.search(plain.stderr + plain.stdout)  # NO_COLOR wins, bold included (the live line may still
    # move the cursor: that is not colour)
    assert "Optimised task norm2" in plain.stdout and "Speed:" in plain.stdout


@pytest.mark.slow
def test_new_task_from_a_users_jitted_function(tmp_path):
    (tmp_path / "mymodel.py").write_text(
        "import jax\nimport jax.numpy as jnp\n\nSCALE = 0.5\n\n\n@jax.jit\ndef scaled_matmul(x, w):\n"
        "    return jnp.dot(x, w) * SCALE\n")
    made = run_cli("new-task", "mm", "--from", "mymodel:scaled_matmul", "--example-args", "f32[2048,1024] f32[1024,512]",
                   cwd=tmp_path, env={"MAXKERNEL_HOME": str(tmp_path / "home")})
    assert made.returncode == 0, made.stderr
    assert "checked at float32[1024,512] float32[512,256]" in made.stdout  # scaled together: K still matches
    import importlib.util

    spec = importlib.util.spec_from_file_location("mm_reference", tmp_path / "mm" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (x, w), static = module.get_inputs(size="small")
    assert x.shape == (1024, 512) and w.shape == (512, 256) and static == ()
    assert module.computation(x, w).shape == (1024, 256)
    assert module.get_flops() == 2 * 2048 * 1024 * 512 + 2048 * 512  # the dot, then the scale
    bad = run_cli("new-task", "bad", "--from", "mymodel:scaled_matmul", "--example-args", "f32[2048,1024] f32[7,512]",
                  cwd=tmp_path)
    assert bad.returncode == 2 and "does not trace at the full size" in bad.stderr
    garbled = run_cli("new-task", "bad", "--template", "matmul", "--example-args", "matrix 4x4", cwd=tmp_path)
    assert garbled.returncode == 2 and "write dtype[dims]" in garbled.stderr


def test_activity_describes_the_oldest_wait_and_the_rest():
    activity = Activity()
    first = activity.begin("judging cand-1")
    time.sleep(0.01)
    activity.begin("waiting for x:y (debug role)")
    assert activity.describe().startswith("judging cand-1") and "1 more in flight" in activity.describe()
    activity.end(first)
    assert activity.describe().startswith("waiting for x:y")
    assert json.dumps(activity.elapsed()) != "0"


def test_make_run_installs_only_what_the_main_job_needs():
    import subprocess

    from ..helpers import REPO

    def planned(target: str) -> str:
        return subprocess.run(["make", "-n", "-B", target], cwd=REPO, capture_output=True, text=True).stdout

    run_plan, test_plan = planned("run"), planned("test")
    installs = [line for line in run_plan.splitlines() if "pip install" in line]
    assert installs and not any("ray" in line or "torch" in line or "[test" in line for line in installs)
    assert "maxkernel run --task" in run_plan
    assert "executors/ray" in test_plan and ".[test,bench,ray,torch,ui]" in test_plan and "ui/" in test_plan and "chromium" in test_plan
    # the suite leaves out the full-size JaxBench compiles, and CI runs them after it
    assert '-m "not jaxbench_full and not second_chip"' in test_plan
    assert '-m "jaxbench_full or second_chip"' in planned("test-jaxbench")
    ci = (REPO / ".ci" / "run").read_text().split()
    assert ci.index("test") < ci.index("test-jaxbench")


def test_no_color_turns_off_colour_and_bold(monkeypatch):
    from maxkernel_core.cli.output import console_for

    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    for no_color, expected in (("", True), ("1", False)):
        monkeypatch.setenv("NO_COLOR", no_color)
        console = console_for()
        with console.capture() as captured:
            console.print("[bold red]verdict[/] ok")
        assert bool(SGR.search(captured.get())) is expected
