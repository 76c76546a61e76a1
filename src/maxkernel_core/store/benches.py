"""The run store's bench tables: which tasks a bench has finished, and the run behind each.

A task row is written when its run starts (status ``running`` with the run id)
and again when it ends (``done`` or ``error`` with its result), so a killed
bench resumes each unfinished task's own run instead of starting it over.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..records import new_id


class BenchRecords:
    """Mixed into :class:`~maxkernel_core.store.RunStore` (uses its ``_tx`` and ``_rows``)."""

    def create_bench(self, config: dict[str, Any]) -> str:
        bench_id = new_id("bench")
        now = time.time()
        with self._tx() as c:
            c.execute("INSERT INTO benches (id, created_at, updated_at, status, config_json) VALUES (?, ?, ?, ?, ?)",
                      (bench_id, now, now, "running", json.dumps(config, sort_keys=True)))
        return bench_id

    def get_bench(self, bench_id: str) -> dict[str, Any]:
        rows = self._rows("SELECT * FROM benches WHERE id = ?", self.resolve_id("bench", bench_id))
        row = rows[0]
        return {"id": row["id"], "status": row["status"], "created_at": row["created_at"],
                "config": json.loads(row["config_json"])}

    def list_benches(self, limit: int = 20) -> list[dict[str, Any]]:
        """Newest first."""
        rows = self._rows("SELECT id FROM benches ORDER BY created_at DESC LIMIT ?", limit)
        return [self.get_bench(r["id"]) for r in rows]

    def set_bench_status(self, bench_id: str, status: str) -> None:
        with self._tx() as c:
            c.execute("UPDATE benches SET status = ?, updated_at = ? WHERE id = ?", (status, time.time(), bench_id))

    def set_bench_task(self, bench_id: str, task_id: str, status: str, *, run_id: str | None = None,
                       result: dict[str, Any] | None = None) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT INTO bench_tasks (bench_id, task_id, run_id, status, result_json, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (bench_id, task_id) DO UPDATE SET"
                " run_id = COALESCE(excluded.run_id, run_id), status = excluded.status,"
                " result_json = COALESCE(excluded.result_json, result_json), updated_at = excluded.updated_at",
                (bench_id, task_id, run_id, status, json.dumps(result, default=str) if result is not None else None,
                 time.time()),
            )

    def bench_tasks(self, bench_id: str) -> dict[str, dict[str, Any]]:
        rows = self._rows("SELECT * FROM bench_tasks WHERE bench_id = ? ORDER BY task_id", bench_id)
        return {r["task_id"]: {"run_id": r["run_id"], "status": r["status"],
                               "result": json.loads(r["result_json"]) if r["result_json"] else None} for r in rows}
