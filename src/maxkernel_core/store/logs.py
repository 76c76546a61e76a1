"""The run store's reads for people: LLM calls filtered as ``maxkernel logs`` asks, ids by unique prefix.

A run id is ``run-`` and 12 hex digits; a person types a few of them. Any
unique prefix (with or without ``run-``) names the run; an ambiguous one is
an error that lists the candidates.
"""

from __future__ import annotations

from typing import Any

from ..errors import StoreError

ID_TABLES = {"run": ("runs", "`maxkernel runs list` shows them"),
             "bench": ("benches", "a bench prints its id when it starts")}


class LogRecords:
    """Mixed into :class:`~maxkernel_core.store.RunStore` (uses its ``_rows`` and ``path``)."""

    def resolve_id(self, kind: str, given: str) -> str:
        """The full id of the ``kind`` ("run" or "bench") that ``given`` is a unique prefix of."""
        table, hint = ID_TABLES[kind]
        given = given.strip()
        if not given:
            raise StoreError(f"an empty {kind} id; {hint}")
        prefix = given if given.startswith(f"{kind}-") else f"{kind}-{given}"
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self._rows(f"SELECT id FROM {table} WHERE id = ? OR id LIKE ? ESCAPE '\\' ORDER BY id LIMIT 6",
                          given, escaped + "%")
        ids = [r["id"] for r in rows]
        if given in ids:
            return given
        if not ids:
            raise StoreError(f"no {kind} {given!r} in {self.path} ({hint})")
        if len(ids) > 1:
            shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
            raise StoreError(f"{kind} id {given!r} is ambiguous: it starts {shown}; give more characters")
        return ids[0]

    def llm_call_rows(self, *, run_id: str | None = None, role: str | None = None, model: str | None = None,
                      status: str | None = None, call_id: int | None = None, limit: int | None = None,
                      newest_first: bool = True) -> list[dict[str, Any]]:
        """LLM calls (every attempt, failed ones too) filtered by run, role, model substring and status
        ("ok": answered, "error": failed)."""
        where, args = [], []
        for column, value in (("run_id", run_id), ("role", role), ("id", call_id)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if model:
            where.append("model LIKE ?")
            args.append(f"%{model}%")
        if status == "ok":
            where.append("error IS NULL")
        elif status == "error":
            where.append("error IS NOT NULL")
        sql = "SELECT * FROM llm_calls" + (f" WHERE {' AND '.join(where)}" if where else "")
        sql += f" ORDER BY id {'DESC' if newest_first else 'ASC'}"
        if limit:
            sql += " LIMIT ?"
            args.append(limit)
        return [dict(r) for r in self._rows(sql, *args)]

    def llm_usage(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Calls, failures, tokens, cost and time per (provider, model, role), for ``logs --usage``."""
        sql = ("SELECT provider, model, role, COUNT(*) AS calls, SUM(error IS NOT NULL) AS errors,"
               " COALESCE(SUM(input_tokens), 0) AS input_tokens, COALESCE(SUM(output_tokens), 0) AS output_tokens,"
               " SUM(cost_usd) AS cost_usd, COALESCE(SUM(latency_s), 0) AS latency_s FROM llm_calls"
               + (" WHERE run_id = ?" if run_id else "") + " GROUP BY provider, model, role ORDER BY provider, model, role")
        return [dict(r) for r in self._rows(sql, *([run_id] if run_id else []))]
