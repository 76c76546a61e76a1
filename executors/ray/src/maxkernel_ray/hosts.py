"""The orchestrator's side of the actors: start them, hand an idle one out, replace a lost one.

A lost actor is not restarted in place by Ray (``max_restarts=0``): its
replacement is a new actor that Ray places wherever the resources it asks for
are free, and it joins the pool only once it has started. Until then the
evaluations go to the actors still alive, so a host that is gone for good
(its resources with it) costs capacity, not the run.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from attrs import define
from maxkernel_core import ExecutorError
import contextlib


def one_line(exc: BaseException) -> str:
    """The line of a Ray error that says what happened (its message carries a whole remote traceback)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    named = [line for line in lines if "Error" in line.split(":")[0] or "Exception" in line.split(":")[0]]
    text = (named or lines or [""])[-1]
    return f"{type(exc).__name__}: {text}"[:400]


@define(eq=False)
class Host:
    handle: Any
    where: dict[str, Any]


class HostPool:
    """``size`` actors judging for one backend; thread-safe."""

    def __init__(self, ray, actor_cls, options: dict[str, Any], args: tuple, size: int, start_timeout_s: float) -> None:
        self.ray, self.actor_cls, self.options, self.args = ray, actor_cls, options, args
        self.start_timeout_s = start_timeout_s
        self._cond = threading.Condition()
        self._idle: list[Host] = []
        self._live = 0  # started and not lost: idle or busy
        self._pending = 0  # asked for, not started yet (waiting for resources, or importing)
        self._handles: list[Any] = []
        self._failures: list[str] = []
        self._closed = False
        for _ in range(size):
            self._spawn()

    def _spawn(self) -> None:
        handle = self.actor_cls.options(**self.options).remote(*self.args)
        with self._cond:
            self._pending += 1
            self._handles.append(handle)
        threading.Thread(target=self._await_start, args=(handle,), daemon=True, name="maxkernel-ray-start").start()

    def _await_start(self, handle) -> None:
        try:
            where = self.ray.get(handle.where.remote())
        except Exception as exc:  # it could not start (a host without the backend, a bad install): keep why
            with self._cond:
                self._pending -= 1
                self._failures.append(one_line(exc))
                self._cond.notify_all()
            return
        with self._cond:
            self._pending -= 1
            if self._closed:
                self._kill(handle)
                return
            self._live += 1
            self._idle.append(Host(handle, where))
            self._cond.notify_all()

    def take(self) -> Host:
        """The longest-idle actor (so work spreads over the hosts); waits while all are busy."""
        deadline = None  # only while no actor is alive: busy actors always come back
        with self._cond:
            while not self._idle:
                if self._closed:
                    raise ExecutorError("the Ray executor is closed")
                if self._live == 0 and self._pending == 0:
                    why = self._failures[-1] if self._failures else "every actor was lost"
                    raise ExecutorError(f"no Ray actor could start to judge candidates ({why}); check that every "
                                        "host has maxkernel and the backend installed")
                if self._live > 0:
                    deadline = None
                    self._cond.wait()
                    continue
                deadline = deadline or time.monotonic() + self.start_timeout_s
                if time.monotonic() >= deadline:
                    raise ExecutorError(f"no Ray actor started within {self.start_timeout_s:g} s: the cluster lacks "
                                        f"the resources asked for ({self.options}); see `ray status`")
                self._cond.wait(max(deadline - time.monotonic(), 0.1))
            return self._idle.pop(0)

    def give_back(self, host: Host) -> None:
        with self._cond:
            self._idle.append(host)
            self._cond.notify_all()

    def lose(self, host: Host) -> None:
        """``host`` died (or stopped answering): make sure it is gone, and ask Ray for a replacement."""
        self._kill(host.handle)
        with self._cond:
            self._live -= 1
            closed = self._closed
        if not closed:
            self._spawn()

    def _kill(self, handle) -> None:
        with contextlib.suppress(Exception):  # already dead, or its node is gone: nothing left to kill
            self.ray.kill(handle, no_restart=True)

    @property
    def size(self) -> int:
        with self._cond:
            return self._live + self._pending

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, handles = list(self._idle), list(self._handles)
            self._idle.clear()
            self._cond.notify_all()
        # Let idle actors stop their worker processes; then make sure every actor is gone.
        with contextlib.suppress(Exception):
            self.ray.get([h.handle.close.remote() for h in idle], timeout=30)
        for handle in handles:
            self._kill(handle)
