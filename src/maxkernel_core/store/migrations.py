"""Schema migrations of the run store, applied in the order they are registered.

Each migration runs once; its name is recorded in ``_migrations``. Add a new
one at the end of this file; never edit one that has shipped.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next migration."""
    if any(m.__name__ == fn.__name__ for m in MIGRATIONS):
        raise ValueError(f"migration {fn.__name__} is registered twice")
    MIGRATIONS.append(fn)
    return fn


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply the migrations not yet recorded; return the names applied."""
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    done = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
    applied = []
    for fn in MIGRATIONS:
        if fn.__name__ in done:
            continue
        # One transaction per migration (the connection is in autocommit mode):
        # SQLite DDL is transactional, so a migration applies whole or not at all.
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have applied it between the read above and this write lock (a bench's
            # parallel tasks open a fresh store at once): ask again under the lock.
            if conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (fn.__name__,)).fetchone():
                conn.execute("COMMIT")
                continue
            fn(conn)
            conn.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (fn.__name__, time.time()))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        applied.append(fn.__name__)
    return applied


def run_script(conn: sqlite3.Connection, sql: str) -> None:
    """Run ``;``-separated statements inside the caller's transaction.

    (``executescript`` would COMMIT first and break the migration's atomicity.)
    """
    for statement in sql.split(";"):
        if statement.strip():
            conn.execute(statement)


@migration
def m001_initial(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            status TEXT NOT NULL,
            task_id TEXT NOT NULL,
            strategy TEXT NOT NULL,
            provider TEXT,
            config_json TEXT NOT NULL,
            result_json TEXT
        );
        CREATE TABLE candidates (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(id),
            task_id TEXT NOT NULL,
            parent_id TEXT,
            created_at REAL NOT NULL,
            record_json TEXT NOT NULL
        );
        CREATE INDEX candidates_run ON candidates(run_id);
        CREATE TABLE evaluations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL REFERENCES runs(id),
            candidate_id TEXT NOT NULL REFERENCES candidates(id),
            status TEXT NOT NULL,
            created_at REAL NOT NULL,
            record_json TEXT NOT NULL
        );
        CREATE INDEX evaluations_run ON evaluations(run_id);
        CREATE INDEX evaluations_candidate ON evaluations(candidate_id);
        CREATE TABLE llm_calls (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT REFERENCES runs(id),
            role TEXT,
            provider TEXT NOT NULL,
            model TEXT,
            prompt_json TEXT NOT NULL,
            response TEXT,
            input_tokens INTEGER,
            output_tokens INTEGER,
            cost_usd REAL,
            latency_s REAL,
            error TEXT,
            created_at REAL NOT NULL
        );
        CREATE INDEX llm_calls_run ON llm_calls(run_id);
        CREATE TABLE search_nodes (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(id),
            candidate_id TEXT NOT NULL,
            parent_id TEXT,
            depth INTEGER NOT NULL,
            score REAL,
            in_beam INTEGER NOT NULL,
            record_json TEXT NOT NULL
        );
        CREATE INDEX search_nodes_run ON search_nodes(run_id);
        CREATE TABLE search_edges (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL REFERENCES runs(id),
            parent_id TEXT NOT NULL,
            child_id TEXT NOT NULL,
            transformation TEXT NOT NULL,
            record_json TEXT NOT NULL
        );
        CREATE INDEX search_edges_run ON search_edges(run_id);
        """
    )


@migration
def m002_decisions(conn: sqlite3.Connection) -> None:
    """Human decisions of interactive strategies (approve, edit, reject, iterate, accept, stop)."""
    run_script(
        conn,
        """
        CREATE TABLE decisions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL REFERENCES runs(id),
            kind TEXT NOT NULL,
            answer TEXT NOT NULL,
            detail TEXT,
            created_at REAL NOT NULL
        );
        CREATE INDEX decisions_run ON decisions(run_id)
        """,
    )


@migration
def m003_benches(conn: sqlite3.Connection) -> None:
    """Benchmark suites: one row per bench, one per task with the run that optimized it."""
    run_script(
        conn,
        """
        CREATE TABLE benches (
            id TEXT PRIMARY KEY,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            status TEXT NOT NULL,
            config_json TEXT NOT NULL
        );
        CREATE TABLE bench_tasks (
            bench_id TEXT NOT NULL REFERENCES benches(id),
            task_id TEXT NOT NULL,
            run_id TEXT,
            status TEXT NOT NULL,
            result_json TEXT,
            updated_at REAL NOT NULL,
            PRIMARY KEY (bench_id, task_id)
        )
        """,
    )


@migration
def m004_verdict_cache(conn: sqlite3.Connection) -> None:
    """Verdicts by (judge fingerprint, program): identical code under the same judge is judged once."""
    run_script(
        conn,
        """
        CREATE TABLE verdicts (
            key TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            candidate_id TEXT NOT NULL,
            created_at REAL NOT NULL,
            record_json TEXT NOT NULL
        )
        """,
    )


@migration
def m005_tuned_configs(conn: sqlite3.Connection) -> None:
    """The tuned-config table: the best verified kernel per operator key (``maxkernel tuned``)."""
    run_script(
        conn,
        """
        CREATE TABLE tuned_configs (
            key TEXT PRIMARY KEY,
            updated_at REAL NOT NULL,
            record_json TEXT NOT NULL
        )
        """,
    )


@migration
def m006_prompts(conn: sqlite3.Connection) -> None:
    """Questions an interactive run waits on, answerable from the terminal or a browser (``maxkernel ui``), and
    who made each decision (the audit line)."""
    run_script(
        conn,
        """
        CREATE TABLE prompts (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL REFERENCES runs(id),
            kind TEXT NOT NULL,
            body_json TEXT NOT NULL,
            created_at REAL NOT NULL,
            state TEXT NOT NULL DEFAULT 'open',
            choice TEXT,
            detail TEXT,
            who TEXT,
            answered_at REAL
        );
        CREATE INDEX prompts_run ON prompts(run_id);
        ALTER TABLE decisions ADD COLUMN who TEXT
        """,
    )
