"""The run store's tuned-config table: the best verified kernel per operator key, kept across runs.

Like tokamax's shipped autotuning results, the table is data: ``maxkernel tuned export``
writes it as JSON beside the kernels, ``import`` reads such a file into another store,
``check`` tells which entries this installation would miss (a new jax is a miss).
"""

from __future__ import annotations

import json
import time

from ..records import TunedConfig
from ..serialize import dumps, from_json, to_json


def key_text(key: dict[str, str]) -> str:
    """A key as the table indexes it (sorted JSON)."""
    return json.dumps(key, sort_keys=True)


class TunedRecords:
    """Mixed into :class:`~maxkernel_core.store.RunStore` (uses its ``_tx`` and ``_rows``)."""

    def tuned(self, key: dict[str, str]) -> TunedConfig | None:
        rows = self._rows("SELECT record_json FROM tuned_configs WHERE key = ?", key_text(key))
        return from_json(rows[0][0], TunedConfig) if rows else None

    def tuned_configs(self) -> list[TunedConfig]:
        rows = self._rows("SELECT record_json FROM tuned_configs ORDER BY key")
        return [from_json(r[0], TunedConfig) for r in rows]

    def keep_tuned(self, config: TunedConfig, replace: bool = False) -> bool:
        """Keep ``config`` when its key has no entry, when it is faster than the entry (of the same kind:
        measured against measured, estimated against estimated; a measurement beats an estimate), or when
        ``replace``. Returns whether it was kept."""
        with self._tx() as c:
            rows = c.execute("SELECT record_json FROM tuned_configs WHERE key = ?", (key_text(config.key),)).fetchall()
            if rows and not replace and not _better(config, from_json(rows[0][0], TunedConfig)):
                return False
            c.execute("INSERT OR REPLACE INTO tuned_configs (key, updated_at, record_json) VALUES (?, ?, ?)",
                      (key_text(config.key), time.time(), dumps(config)))
        return True

    def export_tuned(self) -> dict:
        """The whole table as one JSON-ready document."""
        return {"maxkernel_tuned_configs": 1, "entries": [to_json(c) for c in self.tuned_configs()]}

    def import_tuned(self, document: dict) -> tuple[int, int]:
        """Merge a document made by :meth:`export_tuned` (a better entry wins); (kept, skipped)."""
        if not isinstance(document, dict) or document.get("maxkernel_tuned_configs") != 1:
            raise ValueError("not a maxkernel tuned-config file (made by `maxkernel tuned export`)")
        kept = sum(self.keep_tuned(from_json(entry, TunedConfig)) for entry in document.get("entries", []))
        return kept, len(document.get("entries", [])) - kept


def _better(new: TunedConfig, old: TunedConfig) -> bool:
    if new.seconds is None:
        return False
    if old.seconds is None or (old.estimated and not new.estimated):
        return True
    if new.estimated and not old.estimated:
        return False
    return new.seconds < old.seconds
