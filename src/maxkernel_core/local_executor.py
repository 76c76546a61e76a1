"""The default executor: evaluations run in this machine's sandboxed worker pool (the backend's own).

The core's own, registered through the ``maxkernel`` entry point ``local_executor`` like any plugin, so
that an executor on a cluster (``maxkernel-ray``) is selected the same way it is: ``--executor NAME`` or
``executor.name``. A session made in code without one gets this one: every verdict goes through an executor.
"""

from __future__ import annotations

import contextlib
import os
import threading

from .interfaces import Executor
from .markers import hookimpl


class LocalExecutor(Executor):
    name = "local"
    description = "this machine: the backend's sandboxed worker pool"

    def __init__(self, settings=None) -> None:
        super().__init__(settings)
        limit = settings.executor.concurrency if settings is not None else None
        # No limit unless asked: the worker pool already decides what runs at once (one job at a
        # time on a TPU host), and callers keep their own thread pools small.
        self._gate = threading.BoundedSemaphore(limit) if limit else None
        self._limit = limit

    @property
    def max_concurrency(self) -> int:
        # Two at once keeps a small machine busy (one compiles while the other runs its
        # correctness sets) without oversubscribing it; set executor.concurrency on bigger hosts.
        return self._limit or min(os.cpu_count() or 1, 2)

    def evaluate(self, backend, task, candidate, *, target):
        with self._gate or contextlib.nullcontext():
            return backend.evaluate(task, candidate, target=target)


@hookimpl
def register_executors(register):
    register(LocalExecutor)
