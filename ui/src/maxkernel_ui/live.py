"""Live pages without a polling storm: one watcher per server looks at the store, browsers are told.

The watcher asks SQLite whether anyone committed (``PRAGMA data_version``, one cheap call) every
``POLL_S``; only then does it compute the fingerprint of each page someone is watching (a few indexed
counts), and wakes the server-sent-event streams of the pages whose fingerprint changed. A browser then
fetches that page's live fragment once; fragments are rendered once per fingerprint and shared by every
client (PageCache), so twenty browsers on a 2,000-candidate run cost one render.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from starlette.concurrency import run_in_threadpool

POLL_S = 0.1
KEEPALIVE_S = 15.0
#: how often an idle stream looks whether the server is shutting down
WAKE_S = 0.5
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
        #: set when the server shuts down: open event streams end by themselves instead of being cancelled
        self.closing = False

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
        if not self._watchers:  # nobody is watching a page: nothing to look at (an idle server costs nothing)
            return []
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
        if not self._watchers.get(key):
            self.prints.pop(key, None)  # not kept up to date while nobody watched: computed afresh below
        self._watchers[key] = self._watchers.get(key, 0) + 1
        try:
            last = await self.current(key)
            yield f"data: {last}\n\n"
            quiet = 0.0
            while not self.closing and not await is_disconnected():
                # compared on every wake, not only when notified: a change that came while this stream was
                # sending is not lost
                if self.prints.get(key) != last:
                    last = self.prints[key]
                    quiet = 0.0
                    yield f"data: {last}\n\n"
                    continue
                try:
                    async with self._changed:
                        await asyncio.wait_for(self._changed.wait(), WAKE_S)
                except TimeoutError:
                    quiet += WAKE_S
                    if quiet >= KEEPALIVE_S:  # a comment line keeps proxies from closing an idle stream
                        quiet = 0.0
                        yield ": keepalive\n\n"
        finally:
            self._watchers[key] -= 1
            if not self._watchers[key]:
                del self._watchers[key]


class Page:
    """A rendered page, as text, as UTF-8 bytes, and gzipped when first asked (a 2,000-candidate run page is
    ~2 MB of HTML, ~10x less gzipped), once for every client."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.raw = text.encode()

    @functools.cached_property
    def gzipped(self) -> bytes:
        return gzip.compress(self.raw, compresslevel=5)

    @classmethod
    def of(cls, text: str) -> Page:
        return cls(text)


class PageCache:
    """Rendered pages by (page, fingerprint); concurrent requests for the same one wait for a single render."""

    def __init__(self, size: int = 32) -> None:  # a 2,000-candidate page is ~1.5 MB: at most ~100 MB kept
        self._pages: OrderedDict[tuple, Page] = OrderedDict()
        self._locks: dict[tuple, asyncio.Lock] = {}
        self.size = size

    def has(self, key: tuple) -> bool:
        return key in self._pages

    async def put(self, key: tuple, text: str) -> None:
        self._store(key, await run_in_threadpool(Page.of, text))

    def _store(self, key: tuple, page: Page) -> None:
        self._pages[key] = page
        self._pages.move_to_end(key)
        while len(self._pages) > self.size:
            self._pages.popitem(last=False)

    async def get(self, key: tuple, render: Callable[[], str]) -> Page:
        if key in self._pages:
            self._pages.move_to_end(key)
            return self._pages[key]
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key not in self._pages:
                self._store(key, await run_in_threadpool(lambda: Page.of(render())))
        self._locks.pop(key, None)
        return self._pages[key]
