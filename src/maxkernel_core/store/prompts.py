"""Questions an interactive run is waiting on, answered from wherever a person is: the terminal or a browser.

A strategy asks (``ask``) and waits until the prompt is answered; any process
with the store open may answer it (``answer_prompt``), and the first answer
wins: the update only takes an ``open`` prompt, so a terminal and a browser
answering at once cannot both decide. A prompt's states: ``open`` (waiting),
``answered``, ``closed`` (the run moved on or ended without an answer).
"""

from __future__ import annotations

import json
import time
from typing import Any

PROMPT_STATES = ("open", "answered", "closed")


class PromptRecords:
    """Mixed into :class:`~maxkernel_core.store.RunStore` (uses its ``_tx`` and ``_rows``)."""

    def ask(self, run_id: str, kind: str, body: dict[str, Any]) -> int:
        """Open a prompt of ``kind`` ("plan", "candidate") showing ``body``; earlier open prompts of the run close."""
        with self._tx() as c:
            c.execute("UPDATE prompts SET state = 'closed' WHERE run_id = ? AND state = 'open'", (run_id,))
            cur = c.execute("INSERT INTO prompts (run_id, kind, body_json, created_at) VALUES (?, ?, ?, ?)",
                            (run_id, kind, json.dumps(body, default=str), time.time()))
            return int(cur.lastrowid)

    def answer_prompt(self, prompt_id: int, choice: str, detail: str = "", who: str = "local") -> bool:
        """Answer an open prompt; False when it was already answered or closed (someone else was first)."""
        with self._tx() as c:
            cur = c.execute("UPDATE prompts SET state = 'answered', choice = ?, detail = ?, who = ?, answered_at = ?"
                            " WHERE id = ? AND state = 'open'", (choice, detail, who, time.time(), prompt_id))
            return cur.rowcount == 1

    def close_prompts(self, run_id: str) -> None:
        """Close the run's open prompts (it ended, or was interrupted, while one waited)."""
        with self._tx() as c:
            c.execute("UPDATE prompts SET state = 'closed' WHERE run_id = ? AND state = 'open'", (run_id,))

    def prompt(self, prompt_id: int) -> dict[str, Any] | None:
        rows = self._rows("SELECT * FROM prompts WHERE id = ?", prompt_id)
        return _prompt(rows[0]) if rows else None

    def open_prompts(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Open prompts, oldest first (of one run, or of every run)."""
        if run_id is None:
            rows = self._rows("SELECT * FROM prompts WHERE state = 'open' ORDER BY id")
        else:
            rows = self._rows("SELECT * FROM prompts WHERE state = 'open' AND run_id = ? ORDER BY id", run_id)
        return [_prompt(r) for r in rows]


def _prompt(row) -> dict[str, Any]:
    out = dict(row)
    out["body"] = json.loads(out.pop("body_json"))
    return out
