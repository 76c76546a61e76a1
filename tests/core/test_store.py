import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from maxkernel_core.errors import StoreError
from maxkernel_core.interfaces import LLMMessage, LLMRequest, LLMResponse
from maxkernel_core.records import Candidate, EvalStatus, Evaluation, RunConfig, SearchEdge, SearchNode
from maxkernel_core.store import RunStore
from maxkernel_core.store.migrations import MIGRATIONS

from ..helpers import run_cli


@pytest.fixture
def store(tmp_path):
    s = RunStore(tmp_path / "runs.db")
    yield s
    s.close()


def test_migrations_are_recorded_and_applied_once(tmp_path):
    RunStore(tmp_path / "runs.db").close()
    again = RunStore(tmp_path / "runs.db")  # a second open applies nothing new
    names = [r[0] for r in again._conn.execute("SELECT name FROM _migrations ORDER BY applied_at")]
    assert names == [m.__name__ for m in MIGRATIONS]
    assert again._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_store_two_processes_open_at_once_is_migrated_once(tmp_path):
    """A bench's parallel tasks open a fresh store together: the other process may apply a migration between
    this one's read of _migrations and its write lock (a killed-bench test hit "table decisions already
    exists" on a loaded machine). The migration is asked for again under the lock."""
    import sqlite3

    from maxkernel_core.store.migrations import migrate

    path = tmp_path / "runs.db"
    mine, other = (sqlite3.connect(path, isolation_level=None, timeout=30) for _ in range(2))

    class OvertakenAtTheLock:  # the other process migrates while this one waits for the write lock
        overtaken = False

        def execute(self, sql, *args):
            if sql == "BEGIN IMMEDIATE" and not self.overtaken:
                self.overtaken = True
                migrate(other)
            return mine.execute(sql, *args)

    assert migrate(OvertakenAtTheLock()) == []  # everything was the other's to apply
    names = [r[0] for r in mine.execute("SELECT name FROM _migrations")]
    assert sorted(names) == sorted(m.__name__ for m in MIGRATIONS)
    mine.close()
    other.close()


def test_run_candidates_evaluations_nodes_edges_and_calls(store):
    run = store.create_run(RunConfig("matmul", "graph", "offline"))
    cand = Candidate("matmul", "code")
    store.add_candidate(run, cand)
    store.add_evaluation(run, Evaluation(cand.id, EvalStatus.OK))
    node = SearchNode(run, cand.id)
    store.add_node(node)
    store.add_node(SearchNode(run, cand.id, id=node.id, score=2.0, in_beam=True))  # update in place
    store.add_edge(SearchEdge(run, node.id, "node-x", "larger_k_block"))
    req = LLMRequest((LLMMessage("user", "write a kernel"),), "m", role="implement")
    store.add_llm_call(run, provider="fake", request=req, response=LLMResponse("ok", "m", 10, 20, 0.5, 1.0))
    store.add_llm_call(run, provider="fake", request=req, response=None, error="RateLimit: 429")
    store.set_run_status(run, "ok", {"best": cand.id})

    assert store.candidates(run) == [cand]
    assert [e.status for e in store.evaluations(run)] == [EvalStatus.OK]
    assert [(n.score, n.in_beam) for n in store.nodes(run)] == [(2.0, True)]
    assert store.edges(run)[0].transformation == "larger_k_block"
    calls = store.llm_calls(run)
    assert [(c["input_tokens"], c["error"]) for c in calls] == [(10, None), (None, "RateLimit: 429")]
    summary = store.run_summary(run)
    assert summary["status"] == "ok" and summary["tokens"] == 30 and summary["result"] == {"best": cand.id}
    assert store.list_runs()[0].config.strategy == "graph"


def test_unknown_run_is_a_clear_error(store):
    with pytest.raises(StoreError, match="no run 'run-nope'.*maxkernel runs list"):
        store.get_run("run-nope")


def test_unwritable_home_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="cannot open the run store.*MAXKERNEL_HOME"):
        RunStore(blocker / "sub" / "runs.db")


WRITER = textwrap.dedent("""
    import sys
    from maxkernel_core.records import Candidate, EvalStatus, Evaluation, RunConfig
    from maxkernel_core.store import RunStore
    store = RunStore(sys.argv[1])
    run = store.create_run(RunConfig("t"), run_id="run-kill")
    i = 0
    while True:
        c = Candidate("t", "x" * 20000, id=f"cand-{i:06d}")
        store.add_candidate(run, c)
        store.add_evaluation(run, Evaluation(c.id, EvalStatus.OK))
        print(i, flush=True)  # after the commit: everything up to i is promised durable
        i += 1
""")


def test_sigkill_mid_write_leaves_every_committed_record(tmp_path):
    db = tmp_path / "runs.db"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, text=True)
    last = -1
    for line in proc.stdout:
        last = int(line)
        if last >= 200:
            break
    os.kill(proc.pid, signal.SIGKILL)  # no chance to clean up: mid-transaction most likely
    proc.wait()
    assert proc.returncode == -signal.SIGKILL

    store = RunStore(db)
    assert store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    ids = [c.id for c in store.candidates("run-kill")]
    assert len(ids) >= last + 1
    assert ids[: last + 1] == [f"cand-{i:06d}" for i in range(last + 1)]
    assert len(store.evaluations("run-kill")) >= last + 1
    store.add_candidate("run-kill", Candidate("t", "after the kill"))  # and it keeps working
    assert sqlite3.connect(db).execute("SELECT count(*) FROM candidates").fetchone()[0] == len(ids) + 1


def test_cli_runs_list_and_show(tmp_path):
    home = tmp_path / "home"
    s = RunStore(home / "runs.db")
    run = s.create_run(RunConfig("rmsnorm", "auto", "offline"))
    cand = Candidate("rmsnorm", "code")
    s.add_candidate(run, cand)
    s.add_evaluation(run, Evaluation(cand.id, EvalStatus.COMPILE_ERROR, "VMEM overflow"))
    s.close()
    env = {"MAXKERNEL_HOME": str(home)}
    listed = run_cli("runs", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert run in listed.stdout and "rmsnorm" in listed.stdout
    shown = run_cli("runs", "show", run, env=env)
    assert "compile_error (VMEM overflow)" in shown.stdout
    missing = run_cli("runs", "show", "run-missing", env=env)
    assert missing.returncode == 2 and missing.stderr.startswith("Error: no run 'run-missing'")
