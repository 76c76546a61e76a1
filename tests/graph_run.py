"""The one uninterrupted graph search the graph, resume, web-UI and Ray tests compare against, run once per
test session (``once.py``): ``maxkernel run --strategy graph`` on the RMSNorm task with the offline provider."""

from __future__ import annotations

from pathlib import Path

from .helpers import run_cli
from .once import once
from .tpu_pallas.conftest import TASKS

#: a beam of two, two expansions a node, two levels: the root, its two children, then a batch of four
#: grandchildren that the budget cuts to one (the budget capping a concurrent batch)
GRAPH_TOML = "[strategy.graph]\nbeam_width = 2\ndepth = 2\nexpansions = 2\n"
BUDGET = 4
SEED = 0


def graph_cli(folder: Path, *extra: str, env: dict[str, str] | None = None, resume: str | None = None):
    """``maxkernel run --strategy graph`` with these settings, run in ``folder`` (its store in folder/home)."""
    folder.mkdir(exist_ok=True)
    (folder / "maxkernel.toml").write_text(GRAPH_TOML)
    args = ["run", "--task", str(TASKS / "rmsnorm"), "--strategy", "graph", "--provider", "offline",
            "--seed", str(SEED), "--budget", str(BUDGET), "--out", str(folder / "out"), *extra,
            *(["--resume", resume] if resume else [])]
    return run_cli(*args, cwd=folder, env={"MAXKERNEL_HOME": str(folder / "home"), **(env or {})}, timeout=900)


def _build(folder: Path) -> None:
    done = graph_cli(folder)
    assert done.returncode == 0, done.stderr[-3000:]


def uninterrupted_graph_run() -> Path:
    """The folder of the session's uninterrupted graph run: its store in home/runs.db, its kernel in out/.
    Read it, never write into it."""
    return once("graph-run", _build)
