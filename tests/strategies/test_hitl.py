"""The human-in-the-loop strategy, driven by a file of answers and by a person at a real terminal (pexpect)."""

from __future__ import annotations

import sys

import pytest
from maxkernel_core.store import RunStore

from ..helpers import run_cli
from ..tpu_pallas.conftest import TASKS

pytestmark = pytest.mark.slow

ANSWERS = ["r", "use larger row blocks", "e", '{"BLOCK_ROWS": 64}', "i", "try the next size", "a", "a"]


def test_scripted_session_records_every_decision(tmp_path):
    (tmp_path / "answers.txt").write_text("\n".join(ANSWERS) + "\n")
    (tmp_path / "maxkernel.toml").write_text(f'[strategy.hitl]\nanswers = "{tmp_path / "answers.txt"}"\n')
    result = run_cli("run", "--task", str(TASKS / "rmsnorm"), "--strategy", "hitl", "--provider", "offline",
                     "--out", str(tmp_path / "out"), cwd=tmp_path, env={"MAXKERNEL_HOME": str(tmp_path / "home")},
                     timeout=600)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Plan: [a]pprove / [e]dit / [r]eject: r" in out and "+BLOCK_ROWS = 64" in out  # the diff is shown
    assert "verdict: ok" in out and "profile (estimate)" in out
    store = RunStore(tmp_path / "home" / "runs.db")
    (run,) = store.list_runs()
    decisions = [(d["kind"], d["detail"]) for d in store.decisions(run.id)]
    assert [k for k, _ in decisions] == ["plan:reject", "plan:edit", "candidate:iterate", "plan:approve",
                                         "candidate:accept"]
    assert decisions[0][1] == "use larger row blocks" and '"BLOCK_ROWS": 64' in decisions[1][1]
    sizes = [c.parameters["BLOCK_ROWS"] for c in store.candidates(run.id)]
    assert sizes[0] == 64 and len(sizes) >= 2 and sizes[1] != 64  # the edit, then the planner's next move
    assert run.status == "ok" and result.stdout.count("verdict:") == 2


def test_session_in_a_real_terminal(tmp_path):
    pexpect = pytest.importorskip("pexpect")
    child = pexpect.spawn(sys.executable, ["-m", "maxkernel_core", "run", "--task", str(TASKS / "rmsnorm"),
                                           "--strategy", "hitl", "--provider", "offline", "--out", str(tmp_path / "out")],
                          env={"MAXKERNEL_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "TERM": "dumb",
                               "PYTHONPATH": ":".join(sys.path)},
                          encoding="utf-8", timeout=300)
    child.expect(r"Plan: \[a\]pprove")
    child.sendline("x")  # not an answer: asked again
    child.expect("please answer one of a, e, r")
    child.sendline("a")
    child.expect(r"Candidate: \[a\]ccept")
    child.sendline("s")
    child.expect("Best kernel")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    store = RunStore(tmp_path / "home" / "runs.db")
    assert [d["kind"] for d in store.decisions(store.list_runs()[0].id)] == ["plan:approve", "candidate:stop"]
