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
never import candidate code: they read the program a tracer exported. They are
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
import concurrent.futures
import contextlib
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from attrs import define, field, frozen

from . import bwrap, protocol

ENV_ALLOW = re.compile(r"^(PATH|LANG|LC_\w+|TZ|PYTHONPATH|JAX_\w+|XLA_\w+|TPU_\w+|LIBTPU_\w+|ML_DTYPES_\w+|"
                       r"OPENBLAS_\w+|OMP_NUM_THREADS|MKL_\w+)$")
LOG_TAIL = 4000
#: The device worker is replaced after this many jobs (what it parsed and ran does not outlive them).
DEVICE_JOBS = 200


@frozen
class Limits:
    timeout_s: float = 300.0
    memory_mb: int = 8192
    cpu_s: int | None = None  # default: timeout x cores
    #: "cpu" forces JAX onto the CPU (Pallas interpret mode); "auto" uses the chip when one is attached; the
    #: platform's name ("tpu", "gpu") uses it
    device: str = "auto"
    #: the chip the judge judges for (``judge.platform``): "module:ATTRIBUTE", loaded in every worker
    platform: str = ""


@define
class JobOutcome:
    """What came back from one job: its messages, and how the process ended if it did."""

    status: str  # "done" | "timeout" | "crashed"
    messages: list[tuple[dict[str, Any], list[np.ndarray]]] = field(factory=list)
    returncode: int | None = None
    log_tail: str = ""
    wall_s: float = 0.0
    stage: str = ""
    sandbox: str = ""

    def last(self, kind: str) -> tuple[dict[str, Any], list[np.ndarray]] | None:
        for header, arrays in reversed(self.messages):
            if header.get("type") == kind:
                return header, arrays
        return None

    def all(self, kind: str) -> list[tuple[dict[str, Any], list[np.ndarray]]]:
        return [(h, a) for h, a in self.messages if h.get("type") == kind]

    @property
    def how_it_ended(self) -> str:
        rc = self.returncode
        if rc is None:
            return "still running"
        if rc < 0:
            try:
                return f"killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"killed by signal {-rc}"
        return f"exited with code {rc}"


_spawner: concurrent.futures.ThreadPoolExecutor | None = None
_spawner_lock = threading.Lock()


def spawn(start):
    """Start a worker process from one thread that lives as long as this process.

    bwrap's ``--die-with-parent`` is Linux's parent-death signal, which follows the
    *thread* that forked: a spare started from a search's evaluation thread was
    SIGKILLed as soon as that batch's thread pool shut down.
    """
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="maxkernel-worker-spawner")
    return _spawner.submit(start).result()


def _platform(limits: Limits):
    from ..judge.platform import load_platform

    return load_platform(limits.platform)


def uses_device(limits: Limits) -> bool:
    """Whether jobs that may run on the chip do (``device`` names the platform, or "auto" and one is attached)."""
    platform = _platform(limits)
    return limits.device == platform.name or (limits.device == "auto" and platform.attached())


class Worker:
    """One worker process, its scratch folder, and a thread reading its messages."""

    def __init__(self, limits: Limits, sandboxed: bool = True, on_device: bool = False,
                 ro_paths: tuple[str, ...] = ()) -> None:
        self.limits = limits
        self.sandbox = bwrap.sandbox_name() if sandboxed else "none (trusted task code)"
        self.scratch = Path(tempfile.mkdtemp(prefix="maxkernel-worker-"))
        self.log_path = self.scratch / "worker.log"
        job_r, job_w = os.pipe()
        res_r, res_w = os.pipe()
        env = {k: v for k, v in os.environ.items() if ENV_ALLOW.match(k)}
        env.update(HOME=str(self.scratch), TMPDIR=str(self.scratch), PYTHONDONTWRITEBYTECODE="1",
                   PYTHONUNBUFFERED="1", PYTHONHASHSEED="0")
        self.on_device = on_device
        if on_device:  # the device worker: the chip's platform alone, whatever the parent set for itself
            env["JAX_PLATFORMS"] = _platform(limits).name
            env.pop("ALLOW_MULTIPLE_LIBTPU_LOAD", None)
        else:  # every other worker stays off the chip, even on a host with one
            env["JAX_PLATFORMS"] = "cpu"
            # Deviceless compiles in several workers at once: libtpu's one-process lock guards
            # a chip, and these processes never open one.
            env["ALLOW_MULTIPLE_LIBTPU_LOAD"] = "1"
        cpu_s = limits.cpu_s or int(limits.timeout_s * max(os.cpu_count() or 1, 1)) + 30
        # The device worker runs no candidate Python, and a TPU runtime maps far more address space than any
        # limit a CPU worker gets: its memory is the chip's, bounded by the chip. It lives across many jobs, so a
        # CPU-time limit would end it for the sum of them; each job's wall-clock limit still holds.
        memory_mb, cpu_s = (0, 0) if on_device else (limits.memory_mb, cpu_s)
        argv = [sys.executable, "-m", "maxkernel_pallas_judge.sandbox.worker", str(job_r), str(res_w),
                str(memory_mb), str(cpu_s), limits.platform]
        if self.sandbox == "bwrap":
            env["MAXKERNEL_SANDBOX"] = "bwrap"
            devices = tuple(_platform(limits).device_paths()) if on_device else ()
            argv = bwrap.command(argv, self.scratch, devices=devices, ro_paths=ro_paths)
        with open(self.log_path, "ab") as log:  # appending: a kept worker's log is emptied between its jobs
            self.proc = spawn(lambda: subprocess.Popen(
                argv, close_fds=True,
                pass_fds=(job_r, res_w), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.scratch, env=env, start_new_session=True,  # own process group: killpg reaches all
            ))
        os.close(job_r)
        os.close(res_w)
        self._to_worker = os.fdopen(job_w, "wb")
        self._from_worker = os.fdopen(res_r, "rb")
        self.inbox: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.ready: dict[str, Any] | None = None
        self.jobs = 0

    def _read(self) -> None:
        try:
            while True:
                self.inbox.put(protocol.recv(self._from_worker))
        except EOFError:
            pass
        except (protocol.ProtocolError, OSError, ValueError) as exc:
            self.inbox.put(({"type": "protocol_error", "error": str(exc)}, []))
            self.kill()
        self.inbox.put(None)

    def wait_ready(self, timeout: float) -> bool:
        if self.ready is not None:
            return True
        try:
            item = self.inbox.get(timeout=timeout)
        except queue.Empty:
            return False
        if item is None or item[0].get("type") != "ready":
            if item is not None:
                self.inbox.put(item)
            return False
        self.ready = item[0]
        return True

    def run(self, job: dict[str, Any], arrays: list[np.ndarray], timeout: float) -> JobOutcome:
        if self.on_device:  # a kept worker's log tail must show this job alone
            with contextlib.suppress(OSError):
                os.truncate(self.log_path, 0)
        self.jobs += 1
        start = time.monotonic()
        deadline = start + timeout
        outcome = JobOutcome("crashed")
        if not self.wait_ready(max(deadline - time.monotonic(), 0.1)):
            return self._finish(outcome, start, timed_out=time.monotonic() >= deadline)
        try:
            protocol.send(self._to_worker, job, arrays)
        except (BrokenPipeError, OSError):
            return self._finish(outcome, start)
        while True:
            try:
                item = self.inbox.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                self.kill()
                return self._finish(outcome, start, timed_out=True)
            if item is None:  # the worker's end of the pipe closed: it died
                return self._finish(outcome, start)
            header, payload = item
            if header.get("type") == "stage":
                outcome.stage = str(header.get("stage", ""))
                continue
            outcome.messages.append((header, payload))
            if header.get("type") == "done":
                outcome.status = "done"
                outcome.wall_s = time.monotonic() - start
                return outcome

    def _finish(self, outcome: JobOutcome, start: float, timed_out: bool = False) -> JobOutcome:
        try:
            outcome.returncode = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            outcome.returncode = self.proc.wait()
        if self.sandbox == "bwrap" and outcome.returncode is not None and outcome.returncode > 128:
            outcome.returncode = 128 - outcome.returncode  # bwrap's init reports a signal as 128 + its number
        outcome.status = "timeout" if timed_out else "crashed"
        outcome.wall_s = time.monotonic() - start
        outcome.log_tail = self.log_tail()
        return outcome

    def log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(f.tell() - LOG_TAIL, 0))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def close(self) -> None:
        self.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        for stream in (self._to_worker, self._from_worker):
            with contextlib.suppress(OSError):
                stream.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


_warned = threading.Event()


def warn_once_without_bwrap() -> None:
    """Say once per process, in one line on stderr, that candidates run with the weaker fallback sandbox."""
    message = bwrap.fallback_warning()
    if message and not _warned.is_set():
        _warned.set()
        print(message, file=sys.stderr, flush=True)


class WorkerPool:
    """Hands out pre-warmed workers: a fresh one per untrusted job, a kept one for trusted jobs."""

    def __init__(self, limits: Limits | None = None, spares: int = 1) -> None:
        self.limits = limits or Limits()
        #: whether this host's chip judges and times programs (then one device worker holds it)
        self.on_device = uses_device(self.limits)
        self.spares_wanted = spares
        self._spares: list[Worker] = []
        self._checkers: list[Worker] = []  # idle kept checkers
        self._trusted: Worker | None = None
        self._device: Worker | None = None
        self._lock = threading.Lock()
        self._trusted_lock = threading.Lock()
        self._device_lock = threading.Lock()  # one job at a time on the chip
        self._closed = False
        warn_once_without_bwrap()
        atexit.register(self.close)

    def _take_spare(self) -> Worker:
        with self._lock:
            return self._spares.pop(0) if self._spares else Worker(self.limits, on_device=False)

    def warm_up(self) -> None:
        """Start the spares (e.g. while the reference runs) without waiting for them."""
        with self._lock:
            while len(self._spares) < self.spares_wanted and not self._closed:
                self._spares.append(Worker(self.limits, on_device=False))

    def run_untrusted(self, job: dict[str, Any], arrays: list[np.ndarray] = (), timeout: float | None = None,
                      files: dict[str, str] | None = None) -> JobOutcome:
        """Run one job in a fresh worker, then destroy the worker and its scratch folder."""
        worker = self._take_spare()
        try:
            for name, text in (files or {}).items():
                (worker.scratch / name).write_text(text)
            job = {**job, "scratch": str(worker.scratch)}
            outcome = worker.run(job, list(arrays), timeout or self.limits.timeout_s)
            outcome.sandbox = worker.sandbox
            return outcome
        finally:
            worker.close()
            self.warm_up()  # replace it only now: a spare warming during a job slows the job

    def run_checker(self, job: dict[str, Any], arrays: list[np.ndarray] = (), timeout: float | None = None,
                    ro_paths: list[str] = ()) -> JobOutcome:
        """Run a check of an exported program in a sandboxed worker that never imports candidate code.

        Checkers are kept between jobs (one job at a time each); one that fails or
        times out is replaced. Checkers stay on the CPU, on every host.
        """
        with self._lock:  # a checker that reads task files is made for that task, never a kept one
            worker = self._checkers.pop() if self._checkers and not ro_paths else None
        if worker is None or worker.proc.poll() is not None:
            worker = Worker(self.limits, ro_paths=tuple(ro_paths))
        outcome = worker.run({**job, "scratch": str(worker.scratch)}, list(arrays), timeout or self.limits.timeout_s)
        outcome.sandbox = worker.sandbox
        with self._lock:
            keep = outcome.status == "done" and not self._closed and not ro_paths
            if keep:
                self._checkers.append(worker)
        if not keep:
            worker.close()
        return outcome

    def run_device(self, job: dict[str, Any], arrays: list[np.ndarray] = (), timeout: float | None = None) -> JobOutcome:
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
            outcome = worker.run({**job, "scratch": str(worker.scratch)}, list(arrays), timeout or self.limits.timeout_s)
            outcome.sandbox = worker.sandbox
            if outcome.status != "done" or worker.jobs >= DEVICE_JOBS:
                with self._lock:
                    worker.close()
                    self._device = None
            return outcome

    def run_trusted(self, job: dict[str, Any], arrays: list[np.ndarray] = (), timeout: float | None = None) -> JobOutcome:
        """Run task-owned code (the reference) in a worker of its own, closed after the job.

        A reference job is done once per task and target (its result is cached), so a fresh process costs
        a start-up per task and keeps every task's compile apart: a libtpu compile of one reference cannot
        leave state (or memory toward the address-space limit) behind for the next, and a compile thread
        still running past its time limit dies with its process."""
        with self._trusted_lock:  # one trusted job at a time
            with self._lock:
                # Never a spare: spares must stay free of any task code for the candidates.
                self._trusted = worker = Worker(self.limits, sandboxed=False)
            try:
                return worker.run({**job, "scratch": str(worker.scratch)}, list(arrays), timeout or self.limits.timeout_s)
            finally:
                with self._lock:
                    worker.close()
                    self._trusted = None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = self._spares + self._checkers + [w for w in (self._trusted, self._device) if w]
            self._spares, self._checkers, self._trusted, self._device = [], [], None, None
        for worker in workers:
            worker.close()
