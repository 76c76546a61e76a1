"""The run store: one SQLite file (WAL) holding every run, candidate, verdict and LLM call.

Each ``add_*``/``set_*`` call is its own committed transaction, so a process
killed at any moment leaves a store that opens and holds every record written
before the kill: strategies write each record before they start the next step,
which is what makes ``--resume`` possible.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import platformdirs
from attrs import frozen

from ..errors import StoreError
from ..interfaces import LLMRequest, LLMResponse
from ..records import Candidate, Evaluation, RunConfig, SearchEdge, SearchNode, new_id
from ..serialize import dumps, from_json, to_json
from .benches import BenchRecords
from .logs import LogRecords
from .migrations import migrate
from .prompts import PromptRecords
from .tuned import TunedRecords
from .verdicts import VerdictRecords

DB_NAME = "runs.db"


def default_home(configured: str | None = None) -> Path:
    """``configured`` (config ``store.home``), else ``$MAXKERNEL_HOME``, else the user data dir."""
    home = configured or os.environ.get("MAXKERNEL_HOME")
    return Path(home).expanduser() if home else Path(platformdirs.user_data_dir("maxkernel"))


@frozen
class RunRow:
    """A run as stored: its config and, once finished, its result."""

    id: str
    created_at: float
    updated_at: float
    status: str
    task_id: str
    strategy: str
    provider: str | None
    config: RunConfig
    result: dict[str, Any] | None


class RunStore(BenchRecords, VerdictRecords, TunedRecords, LogRecords, PromptRecords):
    """Read and append records of runs. Safe to share between threads of one process."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: we issue BEGIN/COMMIT ourselves, one transaction per record.
            self._conn = sqlite3.connect(self.path, isolation_level=None, timeout=30, check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL is durable across a killed process (not a power loss) and much faster than FULL.
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._lock = threading.RLock()
            with self._lock:
                migrate(self._conn)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the run store at {self.path}: {exc}; set MAXKERNEL_HOME to a writable folder") from exc
        self._conn.row_factory = sqlite3.Row

    @classmethod
    def open(cls, home: str | Path | None = None) -> RunStore:
        return cls(default_home(str(home) if home else None) / DB_NAME)

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    # --- writes --------------------------------------------------------------

    def create_run(self, config: RunConfig, run_id: str | None = None) -> str:
        run_id = run_id or new_id("run")
        now = time.time()
        with self._tx() as c:
            c.execute(
                "INSERT INTO runs (id, created_at, updated_at, status, task_id, strategy, provider, config_json)"
                " VALUES (?, ?, ?, 'running', ?, ?, ?, ?)",
                (run_id, now, now, config.task, config.strategy, config.provider, dumps(config)),
            )
        return run_id

    def set_run_status(self, run_id: str, status: str, result: dict[str, Any] | None = None) -> None:
        with self._tx() as c:
            cur = c.execute(
                "UPDATE runs SET status = ?, updated_at = ?, result_json = COALESCE(?, result_json) WHERE id = ?",
                (status, time.time(), json.dumps(result, default=str) if result is not None else None, run_id),
            )
            if cur.rowcount != 1:
                raise StoreError(f"no run {run_id!r} in {self.path}")

    def add_candidate(self, run_id: str, candidate: Candidate) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT OR IGNORE INTO candidates (id, run_id, task_id, parent_id, created_at, record_json)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (candidate.id, run_id, candidate.task_id, candidate.parent_id, candidate.created_at, dumps(candidate)),
            )

    def add_evaluation(self, run_id: str, evaluation: Evaluation) -> int:
        with self._tx() as c:
            cur = c.execute(
                "INSERT INTO evaluations (run_id, candidate_id, status, created_at, record_json) VALUES (?, ?, ?, ?, ?)",
                (run_id, evaluation.candidate_id, evaluation.status.value, evaluation.created_at, dumps(evaluation)),
            )
            return int(cur.lastrowid)

    def add_llm_call(
        self,
        run_id: str | None,
        *,
        provider: str,
        request: LLMRequest,
        response: LLMResponse | None,
        error: str | None = None,
        latency_s: float | None = None,
    ) -> int:
        """Log one model call. Keys never reach here: requests carry messages and options only."""
        with self._tx() as c:
            cur = c.execute(
                "INSERT INTO llm_calls (run_id, role, provider, model, prompt_json, response, input_tokens,"
                " output_tokens, cost_usd, latency_s, error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    request.role,
                    provider,
                    (response.model if response and response.model else request.model),
                    dumps(request),
                    response.text if response else None,
                    response.input_tokens if response else None,
                    response.output_tokens if response else None,
                    response.cost_usd if response else None,
                    latency_s if latency_s is not None else (response.latency_s if response else None),
                    error,
                    time.time(),
                ),
            )
            return int(cur.lastrowid)

    def add_node(self, node: SearchNode) -> None:
        """Insert a search node, or update its score and beam membership if it exists."""
        with self._tx() as c:
            c.execute(
                "INSERT INTO search_nodes (id, run_id, candidate_id, parent_id, depth, score, in_beam, record_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET score = excluded.score,"
                " in_beam = excluded.in_beam, record_json = excluded.record_json",
                (node.id, node.run_id, node.candidate_id, node.parent_id, node.depth, node.score, int(node.in_beam), dumps(node)),
            )

    def add_edge(self, edge: SearchEdge) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT INTO search_edges (run_id, parent_id, child_id, transformation, record_json) VALUES (?, ?, ?, ?, ?)",
                (edge.run_id, edge.parent_id, edge.child_id, edge.transformation, dumps(edge)),
            )

    def add_decision(self, run_id: str, kind: str, answer: str, detail: str | None = None,
                     who: str = "terminal") -> None:
        """A person's decision in an interactive run: what was answered, and who answered when (the audit line:
        "terminal", "answers file", or the browser's "local" / "token:<hash prefix>")."""
        with self._tx() as c:
            c.execute("INSERT INTO decisions (run_id, kind, answer, detail, created_at, who) VALUES (?, ?, ?, ?, ?, ?)",
                      (run_id, kind, answer, detail, time.time(), who))

    def decisions(self, run_id: str) -> list[dict[str, Any]]:
        rows = self._rows("SELECT kind, answer, detail, created_at, who FROM decisions WHERE run_id = ? ORDER BY id",
                          run_id)
        return [dict(r) for r in rows]

    # --- reads ---------------------------------------------------------------

    def _rows(self, sql: str, *args: Any) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    @staticmethod
    def _run_row(row: sqlite3.Row) -> RunRow:
        return RunRow(
            id=row["id"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            status=row["status"],
            task_id=row["task_id"],
            strategy=row["strategy"],
            provider=row["provider"],
            config=from_json(row["config_json"], RunConfig),
            result=json.loads(row["result_json"]) if row["result_json"] else None,
        )

    def list_runs(self, limit: int = 50) -> list[RunRow]:
        rows = self._rows("SELECT * FROM runs ORDER BY created_at DESC LIMIT ?", limit)
        return [self._run_row(r) for r in rows]

    def get_run(self, run_id: str) -> RunRow:
        """The run ``run_id`` names: its full id or any unique prefix of it."""
        rows = self._rows("SELECT * FROM runs WHERE id = ?", self.resolve_id("run", run_id))
        return self._run_row(rows[0])

    def candidates(self, run_id: str) -> list[Candidate]:
        rows = self._rows("SELECT record_json FROM candidates WHERE run_id = ? ORDER BY rowid", run_id)
        return [from_json(r[0], Candidate) for r in rows]

    def evaluations(self, run_id: str) -> list[Evaluation]:
        rows = self._rows("SELECT record_json FROM evaluations WHERE run_id = ? ORDER BY id", run_id)
        return [from_json(r[0], Evaluation) for r in rows]

    def records_since(self, run_id: str, candidate_row: int = 0, evaluation_id: int = 0) -> tuple[
            list[tuple[int, Candidate]], list[tuple[int, Evaluation]]]:
        """Candidates and verdicts stored after the given row ids, with their ids: both tables are append-only,
        so a reader that keeps what it read (a live web page) parses only what is new."""
        cands = self._rows("SELECT rowid, record_json FROM candidates WHERE run_id = ? AND rowid > ? ORDER BY rowid",
                           run_id, candidate_row)
        evals = self._rows("SELECT id, record_json FROM evaluations WHERE run_id = ? AND id > ? ORDER BY id",
                           run_id, evaluation_id)
        return ([(r[0], from_json(r[1], Candidate)) for r in cands],
                [(r[0], from_json(r[1], Evaluation)) for r in evals])

    def nodes(self, run_id: str) -> list[SearchNode]:
        rows = self._rows("SELECT record_json FROM search_nodes WHERE run_id = ? ORDER BY rowid", run_id)
        return [from_json(r[0], SearchNode) for r in rows]

    def edges(self, run_id: str) -> list[SearchEdge]:
        rows = self._rows("SELECT record_json FROM search_edges WHERE run_id = ? ORDER BY id", run_id)
        return [from_json(r[0], SearchEdge) for r in rows]

    def llm_calls(self, run_id: str) -> list[dict[str, Any]]:
        rows = self._rows("SELECT * FROM llm_calls WHERE run_id = ? ORDER BY id", run_id)
        return [dict(r) for r in rows]

    def run_summary(self, run_id: str) -> dict[str, Any]:
        """A run with counts and verdicts, as ``maxkernel runs show --json`` prints it."""
        run = self.get_run(run_id)
        run_id = run.id
        evaluations = self.evaluations(run_id)
        calls = self.llm_calls(run_id)
        return {
            "id": run.id,
            "status": run.status,
            "task": run.task_id,
            "strategy": run.strategy,
            "provider": run.provider,
            "created_at": run.created_at,
            "updated_at": run.updated_at,
            "config": to_json(run.config),
            "result": run.result,
            "candidates": len(self.candidates(run_id)),
            "evaluations": [
                {"candidate": e.candidate_id, "status": e.status.value, "reason": e.reason} for e in evaluations
            ],
            "llm_calls": len(calls),
            "tokens": sum((c["input_tokens"] or 0) + (c["output_tokens"] or 0) for c in calls),
            "search_nodes": len(self.nodes(run_id)),
            "llm_usage": self.llm_usage(run_id),
        }
