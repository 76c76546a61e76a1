"""One worker process: its sandboxed start, its scratch folder, and the thread that reads its messages
(``pool.py`` decides which worker takes which job; ``worker.py`` is the process's own side)."""

from __future__ import annotations

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

from . import bwrap, protocol
from .records import JobOutcome, Limits

ENV_ALLOW = re.compile(r"^(PATH|LANG|LC_\w+|TZ|PYTHONPATH|JAX_\w+|XLA_\w+|TPU_\w+|LIBTPU_\w+|ML_DTYPES_\w+|"
                       r"OPENBLAS_\w+|OMP_NUM_THREADS|MKL_\w+)$")
LOG_TAIL = 4000
#: The device worker is replaced after this many jobs (what it parsed and ran does not outlive them).
DEVICE_JOBS = 200


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


def trusted_memory_mb(limits: Limits) -> int:
    """The task's own reference (trusted code) may use half the host's memory when that is more than a
    candidate's limit: a full-size reference's temporaries (10p's experts: 7.5 GB) are not a candidate's to
    bound, and the limit is there only to keep a runaway reference from taking the machine."""
    try:
        host_mb = (os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")) >> 20
    except (ValueError, OSError):
        host_mb = 0
    return max(limits.memory_mb, host_mb // 2)


#: Linux's fcntl to size a pipe, and the size an ordinary user may set (``/proc/sys/fs/pipe-max-size``'s default)
F_SETPIPE_SZ, PIPE_BYTES = 1031, 1 << 20


def _pipe() -> tuple[int, int]:
    """A pipe of 1 MiB where the OS allows it: full-size inputs and outputs cross it, and the default 64 KiB
    costs a switch between the processes per 64 KiB (half the throughput here; more under gVisor)."""
    r, w = os.pipe()
    with contextlib.suppress(OSError, AttributeError):
        import fcntl

        fcntl.fcntl(w, F_SETPIPE_SZ, PIPE_BYTES)
    return r, w


class Worker:
    """One worker process, its scratch folder, and a thread reading its messages."""

    def __init__(self, limits: Limits, sandboxed: bool = True, on_device: bool = False,
                 ro_paths: tuple[str, ...] = (), max_bytes: int = 1 << 62) -> None:
        self.limits = limits
        #: what this worker may send in all (a candidate's tracer sends programs, not data: a worker writing
        #: on and on would fill the judge's memory)
        self.max_bytes = max_bytes
        self.sandbox = bwrap.sandbox_name() if sandboxed else "none (trusted task code)"
        self.scratch = Path(tempfile.mkdtemp(prefix="maxkernel-worker-"))
        self.log_path = self.scratch / "worker.log"
        job_r, job_w = _pipe()
        res_r, res_w = _pipe()
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
        memory_mb, cpu_s = (0, 0) if on_device else (limits.memory_mb if sandboxed else trusted_memory_mb(limits), cpu_s)
        argv = [sys.executable, "-m", "maxkernel_pallas_judge.sandbox.worker", str(job_r), str(res_w),
                str(memory_mb), str(cpu_s), limits.platform]
        if self.sandbox == "bwrap":
            env["MAXKERNEL_SANDBOX"] = "bwrap"
            devices = tuple(_platform(limits).device_paths()) if on_device else ()
            argv = bwrap.command(argv, self.scratch, devices=devices, ro_paths=ro_paths, hidden=limits.hidden)
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
        budget = self.max_bytes  # over a job or many: an untrusted worker runs one job
        try:
            while True:
                header, arrays, size = protocol.recv_counted(self._from_worker, min(budget, protocol.MAX_MESSAGE))
                budget -= size
                self.inbox.put((header, arrays))
        except EOFError:
            pass
        except Exception as exc:  # whatever the other side wrote, this thread ends with its end marker
            self.inbox.put(({"type": "protocol_error", "error": f"{type(exc).__name__}: {exc}"[:300]}, []))
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
                # a tracer's stage names reach a verdict's words ("stuck during ..."): one short printable line
                name = "".join(c for c in str(header.get("stage", ""))[:80] if c.isprintable())
                outcome.stages.append((name, time.monotonic() - start))
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
