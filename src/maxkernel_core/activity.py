"""What a run is doing right now, for the live line: a model call being waited on, a retry, a verdict.

A hung model and a hung tool must look different: the session notes each wait
here (what, since when, which retry) and the CLI's live line reads it four
times a second. Several evaluations or calls may be in flight at once; the
line shows the oldest, and how many others.
"""

from __future__ import annotations

import itertools
import threading
import time

from attrs import define, field


@define
class Wait:
    what: str
    since: float
    retry: int = 0
    max_retries: int = 0
    last_error: str = ""


@define
class Activity:
    started: float = field(factory=time.monotonic)
    _waits: dict[int, Wait] = field(factory=dict)
    _ids: itertools.count = field(factory=itertools.count)
    _lock: threading.Lock = field(factory=threading.Lock)

    def begin(self, what: str, max_retries: int = 0) -> int:
        with self._lock:
            token = next(self._ids)
            self._waits[token] = Wait(what, time.monotonic(), max_retries=max_retries)
            return token

    def retrying(self, token: int, retry: int, error: str) -> None:
        """The wait ``token`` failed and is tried again (``retry`` of its ``max_retries``)."""
        with self._lock:
            wait = self._waits.get(token)
            if wait is not None:
                wait.retry, wait.last_error, wait.since = retry, error, time.monotonic()

    def end(self, token: int) -> None:
        with self._lock:
            self._waits.pop(token, None)

    def describe(self, now: float | None = None) -> str:
        """"waiting for offline:plan 12 s (retry 2 of 5 after LLMTimeout)", or "" when nothing is awaited."""
        now = time.monotonic() if now is None else now
        with self._lock:
            waits = sorted(self._waits.values(), key=lambda w: w.since)
        if not waits:
            return ""
        oldest = waits[0]
        text = f"{oldest.what} {now - oldest.since:,.0f} s"
        if oldest.retry:
            text += f" (retry {oldest.retry} of {oldest.max_retries} after {oldest.last_error[:60]})"
        if len(waits) > 1:
            text += f"; {len(waits) - 1} more in flight"
        return text

    def elapsed(self, now: float | None = None) -> float:
        return (time.monotonic() if now is None else now) - self.started
