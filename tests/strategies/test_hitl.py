"""The human-in-the-loop strategy driven by a file of answers (a real terminal and a browser: tests/ui)."""

from __future__ import annotations

import re

import pytest
from maxkernel_core.store import RunStore

from ..helpers import run_cli
from ..tpu_pallas.conftest import TASKS

pytestmark = pytest.mark.slow

# help, three rejections (a direction, something the offline planner cannot follow, a size), an edit, an
# instruction, approve, accept
ANSWERS = ["?", "r", "use smaller blocks", "r", "make it purple", "r", "32 rows", "e", '{"BLOCK_ROWS": 64}',
           "i", "larger row blocks", "a", "a"]


def _proposed(out: str) -> list[int]:
    return [int(m) for m in re.findall(r'^parameters: \{"BLOCK_ROWS": (\d+)', out, re.MULTILINE)]


def test_scripted_session_follows_feedback_and_records_every_decision(tmp_path):
    (tmp_path / "answers.txt").write_text("\n".join(ANSWERS) + "\n")
    (tmp_path / "maxkernel.toml").write_text(f'[strategy.hitl]\nanswers = "{tmp_path / "answers.txt"}"\n')
    result = run_cli("run", "--task", str(TASKS / "rmsnorm"), "--strategy", "hitl", "--provider", "offline",
                     "--out", str(tmp_path / "out"), cwd=tmp_path, env={"MAXKERNEL_HOME": str(tmp_path / "home")},
                     timeout=600)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "a  approve: implement this plan" in out and "Ctrl-C  interrupt" in out  # ? explains the choices
    assert "Plan: [a]pprove / [e]dit / [r]eject (? for help): r" in out and "+BLOCK_ROWS = 64" in out  # a diff
    proposed = _proposed(out)
    assert proposed[1] < proposed[0]  # "use smaller blocks": smaller than the plan the person saw
    assert "Cannot follow your instructions: 'make it purple'" in out  # said, not silently ignored
    assert proposed[3] == 32  # "32 rows"
    assert "plan as edited: Edited by hand: BLOCK_ROWS 32 -> 64" in out  # the prose follows the edit
    assert proposed[4] > 64  # "larger row blocks": larger than the kernel the edit produced
    assert len(set(proposed[:4])) == 4  # a rejected plan is never proposed again
    assert "verdict: ok" in out and "speed: " in out and "estimated for v5e" in out
    store = RunStore(tmp_path / "home" / "runs.db")
    (run,) = store.list_runs()
    decisions = [(d["kind"], d["detail"]) for d in store.decisions(run.id)]
    assert [k for k, _ in decisions] == ["plan:reject"] * 3 + ["plan:edit", "candidate:iterate", "plan:approve",
                                                                "candidate:accept"]
    assert decisions[0][1] == "use smaller blocks" and '"BLOCK_ROWS": 64' in decisions[3][1]
    sizes = [c.parameters["BLOCK_ROWS"] for c in store.candidates(run.id)]
    assert sizes[:2] == [64, proposed[4]]  # (then the debugger may halve a block that overflows VMEM)
    assert run.status == "ok" and result.stdout.count("verdict:") == 2
