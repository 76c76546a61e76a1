"""The run store's verdict cache: a verdict kept by the program it judged and the judge that judged it.

The key (see :mod:`maxkernel_core.verdict_cache`) covers everything a verdict depends on, so
a hit may stand in for a fresh evaluation: in the same run or in any later one on this store.
"""

from __future__ import annotations

import time

from ..records import Evaluation
from ..serialize import dumps, from_json


class VerdictRecords:
    """Mixed into :class:`~maxkernel_core.store.RunStore` (uses its ``_tx`` and ``_rows``)."""

    def cached_verdict(self, key: str) -> tuple[str, Evaluation] | None:
        """("run-id/candidate-id", verdict) stored under ``key``, or None."""
        rows = self._rows("SELECT run_id, candidate_id, record_json FROM verdicts WHERE key = ?", key)
        if not rows:
            return None
        run_id, candidate_id, record = rows[0]
        return f"{run_id}/{candidate_id}", from_json(record, Evaluation)

    def cache_verdict(self, key: str, run_id: str, evaluation: Evaluation) -> None:
        """Keep ``evaluation`` under ``key``; the first verdict for a key stays (it is the one judged)."""
        with self._tx() as c:
            c.execute("INSERT OR IGNORE INTO verdicts (key, run_id, candidate_id, created_at, record_json)"
                      " VALUES (?, ?, ?, ?, ?)", (key, run_id, evaluation.candidate_id, time.time(), dumps(evaluation)))

    def forget_verdicts(self) -> int:
        """Empty the cache (``maxkernel cache clear``); the runs' own records stay. Returns rows removed."""
        with self._tx() as c:
            return c.execute("DELETE FROM verdicts").rowcount
