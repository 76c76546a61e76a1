"""Live pages without a polling storm: one watcher per server looks at the store, browsers are told.

The watcher asks SQLite whether anyone committed (``PRAGMA data_version``, one cheap call) every
``POLL_S``; only then does it compute the fingerprint of each page someone is watching (a few indexed
counts), and wakes the server-sent-event streams of the pages whose fingerprint changed. A browser then
fetches that page's live fragment once; fragments are rendered once per fingerprint and shared by every
client (PageCache), so twenty browsers on a 2,000-candidate run cost one render.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from starlette.concurrency import run_in_threadpool

POLL_S = 0.25
KEEPALIVE_S = 15.0
RUN_PRINT = """SELECT r.status, r.updated_at,
  (SELECT count(*) FROM candidates WHERE run_id = r.id), (SELECT count(*) FROM evaluations WHERE run_id = r.id),
  (SELECT count(*) FROM decisions WHERE run_id = r.id), (SELECT max(id) FROM prompts WHERE run_id = r.id),
  (SELECT count(*) FROM prompts WHERE run_id = r.id AND state = 'open') FROM runs r WHERE r.id = ?"""
RUNS_PRINT = """SELECT (SELECT count(*) FROM runs), (SELECT max(updated_at) FROM runs),
  (SELECT max(id) FROM prompts), (SELECT count(*) FROM prompts WHERE state = 'open'),
  (SELECT count(*) FROM benches), (SELECT max(updated_at) FROM bench_tasks)"""


class Watcher:
    """Fingerprints of watched pages ("runs", "run:<id>", "bench:<id>"), recomputed when the store changes."""

    def __init__(self, db_path: Path) -> None:
        # its own connection: data_version only moves for commits made by *other* connections
        self._conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, check_same_thread=False)
        self._lock = threading.Lock()  # the poller and page requests use the connection from pool threads
        self._data_version: int | None = None
        self.prints: dict[str, str] = {}
        self._watchers: dict[str, int] = {}
        self._changed = asyncio.Condition()
        self._task: asyncio.Task | None = None

    def fingerprint(self, key: str) -> str:
        with self._lock:
            return self._fingerprint(key)

    def _fingerprint(self, key: str) -> str:
        kind, _, ident = key.partition(":")
        if kind == "run":
            row = self._conn.execute(RUN_PRINT, (ident,)).fetchone()
        elif kind == "bench":
            row = self._conn.execute("SELECT count(*), max(updated_at), (SELECT status FROM benches WHERE id = ?) "
                                     "FROM bench_tasks WHERE bench_id = ?", (ident, ident)).fetchone()
        else:
            row = self._conn.execute(RUNS_PRINT).fetchone()
        return "-".join(str(v) for v in (row or ()))

    async def current(self, key: str) -> str:
        """The page's fingerprint now (kept up to date by the poller while someone watches the page)."""
        if key not in self._watchers or key not in self.prints:
            self.prints[key] = await run_in_threadpool(self.fingerprint, key)
        return self.prints[key]

    def _poll(self) -> list[str]:
        with self._lock:
            version = self._conn.execute("PRAGMA data_version").fetchone()[0]
        if version == self._data_version:
            return []
        self._data_version = version
        changed = []
        for key in list(self._watchers):
            new = self.fingerprint(key)
            if self.prints.get(key) != new:
                self.prints[key] = new
                changed.append(key)
        return changed

    async def run(self) -> None:
        while True:
            changed = await run_in_threadpool(self._poll)
            if changed:
                async with self._changed:
                    self._changed.notify_all()
            await asyncio.sleep(POLL_S)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
        self._conn.close()

    async def events(self, key: str, is_disconnected: Callable):
        """Server-sent events for one page: its fingerprint now, then each time it changes."""
        self._watchers[key] = self._watchers.get(key, 0) + 1
        try:
            last = await self.current(key)
            yield f"data: {last}\n\n"
            while not await is_disconnected():
                try:
                    async with self._changed:
                        await asyncio.wait_for(self._changed.wait(), KEEPALIVE_S)
                except TimeoutError:
                    yield ": keepalive\n\n"
                    continue
                if self.prints.get(key) != last:
                    last = self.prints[key]
                    yield f"data: {last}\n\n"
        finally:
            self._watchers[key] -= 1
            if not self._watchers[key]:
                del self._watchers[key]


class PageCache:
    """Rendered HTML by (page, fingerprint); concurrent requests for the same one wait for a single render."""

    def __init__(self, size: int = 64) -> None:
        self._pages: OrderedDict[tuple, str] = OrderedDict()
        self._locks: dict[tuple, asyncio.Lock] = {}
        self.size = size

    async def get(self, key: tuple, render: Callable[[], str]) -> str:
        if key in self._pages:
            self._pages.move_to_end(key)
            return self._pages[key]
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key not in self._pages:
                self._pages[key] = await run_in_threadpool(render)
                while len(self._pages) > self.size:
                    self._pages.popitem(last=False)
        self._locks.pop(key, None)
        return self._pages[key]
