"""Worker processes that run task and candidate code, never the orchestrator itself.

Recycling policy: **one candidate per process, from a pool of pre-warmed spares.**
A spare has already imported JAX, Pallas and libtpu (the costly part), but has
run no task or candidate code. It takes one untrusted job and is then killed
with its whole process group, so nothing a candidate did (patched modules,
globals, caches, leaked threads, a filled compilation cache) can reach the next
candidate. A fork server would be cheaper still, but forking a process that
has started XLA's threads is unsafe, and reusing a process for N candidates
lets state leak; fresh pre-warmed processes give the isolation of "cold" at
close to the cost of "warm".

Trusted jobs (the task's reference) run in a worker of their own, on the CPU.

Checker workers (the one-program judge's second sandbox, ``judge/check_job.py``)
never import candidate code: they read the programs (jaxprs) a tracer traced. They are
kept and reused, one job at a time each, so a check pays no start-up.

The device worker (``judge/device_job.py``), on a host with the chip only, is the
one process that opens it: one process at a time can hold a TPU, and opening it
costs about 15 s, so it is kept across jobs and every job that needs the chip
waits for it in turn. It runs exported programs only, never task or candidate
Python: the reference's programs (exported by the trusted reference job) and a
candidate's program once the checker has proven, compiled and checked it. Every
other worker, and the orchestrator, stays on the CPU.

Limits: every worker that touches candidate code or its program runs inside
bubblewrap (``bwrap.py``: PID, mount, network, IPC and UTS namespaces, its own
/proc, a read-only filesystem but its scratch folder, death with its parent);
wall-clock timeout kept by the parent (SIGKILL to bwrap, which takes the whole
PID namespace with it), address-space and CPU-time rlimits set by the worker
on itself before any untrusted code runs, a private scratch folder as cwd,
HOME and TMPDIR, an environment allowlist (no API keys). Without bwrap the
weaker fallback: a new network namespace where the OS allows one and the
process group. stdout/stderr go to a log file, read back truncated.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
from typing import Any, ClassVar, Protocol

import numpy as np

from . import bwrap
from .process import DEVICE_JOBS, Worker, uses_device
from .records import JobOutcome, Limits  # noqa: F401  (re-exported: the judge imports them from here)


_warned = threading.Event()
#: one INFO line per job (its kind, wall time and how it ended): where an evaluation's time goes
log = logging.getLogger("maxkernel_pallas_judge.jobs")
#: All a tracer (the candidate's own process) may send: its programs as bytes, a few MiB each, and reports.
TRACER_BYTES = 512 << 20


class Job(Protocol):
    """What the pool asks of a job (``judge/job_records.py`` has the kinds): its kind, its message header, and
    itself with the scratch folder of the worker that takes it."""

    KIND: ClassVar[str]

    def header(self) -> dict[str, Any]: ...
    def with_scratch(self, scratch: str) -> Job: ...


def _logged(job: Job, outcome: JobOutcome) -> JobOutcome:
    task = getattr(job, "task", None)
    name = task.get("module", "") if isinstance(task, dict) else ""
    marks = [*outcome.stages, ("end", outcome.wall_s)]
    split = ", ".join(f"{stage} {end - at:.1f}" for (stage, at), (_, end) in zip(marks, marks[1:], strict=False))
    log.info("%s %.1f s %s %s [%s]", job.KIND, outcome.wall_s, outcome.status, name, split)
    return outcome


def warn_once_without_bwrap() -> None:
    """Say once per process, in one line on stderr, that candidates run with the weaker fallback sandbox."""
    message = bwrap.fallback_warning()
    if message and not _warned.is_set():
        _warned.set()
        print(message, file=sys.stderr, flush=True)


class WorkerPool:
    """Hands out pre-warmed workers: a fresh one per untrusted job, a kept one for trusted jobs."""

    def __init__(self, limits: Limits | None = None, spares: int = 1, trusted_at_once: int = 1) -> None:
        self.limits = limits or Limits()
        #: whether this host's chip judges and times programs (then one device worker holds it)
        self.on_device = uses_device(self.limits)
        self.spares_wanted = spares
        self._spares: list[Worker] = []
        self._checkers: list[Worker] = []  # idle kept checkers
        self._trusted: list[Worker] = []
        self._device: Worker | None = None
        self._lock = threading.Lock()
        #: trusted jobs at once: each may use half the host's memory, so one unless the host has room
        self._trusted_slots = threading.BoundedSemaphore(max(trusted_at_once, 1))
        self._device_lock = threading.Lock()  # one job at a time on the chip
        self._closed = False
        warn_once_without_bwrap()
        atexit.register(self.close)

    def _take_spare(self) -> Worker:
        with self._lock:
            return self._spares.pop(0) if self._spares else Worker(self.limits, on_device=False,
                                                                   max_bytes=TRACER_BYTES)

    def warm_up(self) -> None:
        """Start the spares (e.g. while the reference runs) without waiting for them."""
        with self._lock:
            while len(self._spares) < self.spares_wanted and not self._closed:
                self._spares.append(Worker(self.limits, on_device=False, max_bytes=TRACER_BYTES))

    def _run(self, worker: Worker, job: Job, arrays, timeout: float | None) -> JobOutcome:
        """``job`` on ``worker``, with that worker's scratch folder, within ``timeout`` (else the limits')."""
        return worker.run(job.with_scratch(str(worker.scratch)).header(), list(arrays),
                          timeout or self.limits.timeout_s)

    def run_untrusted(self, job: Job, arrays: list[np.ndarray] = (), timeout: float | None = None,
                      files: dict[str, str] | None = None) -> JobOutcome:
        """Run one job in a fresh worker, then destroy the worker and its scratch folder."""
        worker = self._take_spare()
        try:
            for name, text in (files or {}).items():
                (worker.scratch / name).write_text(text)
            outcome = self._run(worker, job, arrays, timeout)
            outcome.sandbox = worker.sandbox
            return _logged(job, outcome)
        finally:
            worker.close()
            self.warm_up()  # replace it only now: a spare warming during a job slows the job

    def run_checker(self, job: Job, arrays: list[np.ndarray] = (), timeout: float | None = None,
                    ro_paths: list[str] = ()) -> JobOutcome:
        """Run a check of an exported program in a sandboxed worker that never imports candidate code.

        Checkers are kept between jobs (one job at a time each); one that fails or
        times out is replaced. Checkers stay on the CPU, on every host.
        """
        with self._lock:  # a checker that reads task files is made for that task, never a kept one
            worker = self._checkers.pop() if self._checkers and not ro_paths else None
        if worker is None or worker.proc.poll() is not None:
            worker = Worker(self.limits, ro_paths=tuple(ro_paths))
        outcome = self._run(worker, job, arrays, timeout)
        outcome.sandbox = worker.sandbox
        done = outcome.last("done")
        with self._lock:  # a checker that said it retires is exiting: kept, the next job would find it gone
            keep = (outcome.status == "done" and not self._closed and not ro_paths
                    and not (done is not None and done[0].get("retire")))
            if keep:
                self._checkers.append(worker)
        if not keep:
            worker.close()
        return _logged(job, outcome)

    def run_device(self, job: Job, arrays: list[np.ndarray] = (), timeout: float | None = None) -> JobOutcome:
        """Run a job on the chip in the one device worker, kept across jobs; jobs wait for it in turn.

        A worker that crashed or timed out is replaced by a fresh one (whatever it held is gone: a job that
        needs held data says so, and the caller sends it again)."""
        if not self.on_device:
            raise RuntimeError("no chip is attached to judge on (the pool runs no device worker)")
        with self._device_lock:
            with self._lock:
                if self._closed:
                    return JobOutcome("crashed", log_tail="the pool is closed")
                worker = self._device
                if worker is None or worker.proc.poll() is not None:
                    if worker is not None:
                        worker.close()
                    self._device = worker = Worker(self.limits, on_device=True)
            outcome = self._run(worker, job, arrays, timeout)
            outcome.sandbox = worker.sandbox
            if outcome.status != "done" or worker.jobs >= DEVICE_JOBS:
                with self._lock:
                    worker.close()
                    self._device = None
            return _logged(job, outcome)

    def run_trusted(self, job: Job, arrays: list[np.ndarray] = (), timeout: float | None = None) -> JobOutcome:
        """Run task-owned code (the reference) in a worker of its own, closed after the job.

        A reference job is done once per task and target (its result is cached), so a fresh process costs
        a start-up per task and keeps every task's compile apart: a libtpu compile of one reference cannot
        leave state (or memory toward the address-space limit) behind for the next, and a compile thread
        still running past its time limit dies with its process."""
        with self._trusted_slots:
            with self._lock:
                # Never a spare: spares must stay free of any task code for the candidates.
                worker = Worker(self.limits, sandboxed=False)
                self._trusted.append(worker)
            try:
                outcome = self._run(worker, job, arrays, timeout)
                return _logged(job, outcome)
            finally:
                with self._lock:
                    worker.close()
                    if worker in self._trusted:  # close() may have taken it already
                        self._trusted.remove(worker)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = self._spares + self._checkers + self._trusted + ([self._device] if self._device else [])
            self._spares, self._checkers, self._trusted, self._device = [], [], [], None
        for worker in workers:
            worker.close()
