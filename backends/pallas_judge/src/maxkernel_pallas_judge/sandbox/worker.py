"""A worker process: ``python -m maxkernel_pallas_judge.sandbox.worker JOB_FD RESULT_FD MEMORY_MB CPU_S PLATFORM``
(``PLATFORM``: the judge's ``module:ATTRIBUTE``, see ``judge/platform.py``).

Order matters: cut the network and set the limits first (unshare needs a
single-threaded process, and untrusted code must never run unlimited), then
import JAX/Pallas/libtpu (the slow part, done before any job arrives, which is
what makes a spare "warm"), then say ``ready`` and serve jobs.

The address-space limit is the one limit set after the warm-up, as ``MEMORY_MB`` beyond what the warmed-up
runtime maps: on a TPU host libtpu and the CPU client reserve about 5.4 GiB of address space before any job
(measured on the lent v5e; about 2 GiB on a host without a chip), so a limit counted from zero left a
full-size reference 2.6 GiB and refused it. No job, so no candidate code, has arrived before it is set.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000


def isolate_network() -> str:
    """Move into an empty network namespace: no interface but a downed loopback."""
    libc = ctypes.CDLL(None, use_errno=True)
    for flags in (CLONE_NEWNET, CLONE_NEWUSER | CLONE_NEWNET):  # root, then unprivileged user namespaces
        if libc.unshare(flags) == 0:
            return "isolated"
    return f"not isolated (unshare: {os.strerror(ctypes.get_errno())})"


def mapped_bytes() -> int:
    """This process's address space now (``VmSize``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) << 10
    return 0


def limit_memory(memory_mb: int) -> None:
    """At most ``memory_mb`` MiB of address space beyond what is mapped now; 0: no limit (the device worker,
    whose runtime maps the chip's memory)."""
    if memory_mb > 0:
        limit = mapped_bytes() + (memory_mb << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def set_limits(cpu_s: int) -> None:
    if cpu_s > 0:  # 0: the device worker, kept across jobs (each job's wall-clock limit holds)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 30, 1 << 30))  # no filling the disk


def set_idle_priority(idle: bool) -> None:
    """Warm up at idle priority, serve a job at normal priority (every thread of the process).

    A spare importing JAX must not slow the evaluation running beside it on a
    small machine; Linux scheduling policy is per thread, hence the loop.
    """
    policy = os.SCHED_IDLE if idle else os.SCHED_OTHER
    for tid in os.listdir("/proc/self/task"):
        # not permitted (an unprivileged user leaving SCHED_IDLE): run as we are
        with contextlib.suppress(OSError):
            os.sched_setscheduler(int(tid), policy, os.sched_param(0))


def main(argv: list[str]) -> None:
    job_fd, result_fd, memory_mb, cpu_s = (int(a) for a in argv[:4])
    platform_spec = argv[4]
    # Inside bubblewrap the network namespace is already empty (and without capabilities
    # unshare would fail): only the fallback isolates itself.
    network = "isolated (bwrap)" if os.environ.get("MAXKERNEL_SANDBOX") == "bwrap" else isolate_network()
    set_limits(cpu_s)
    set_idle_priority(True)

    from . import protocol  # noqa: E402  (after the limits)

    job_in = os.fdopen(job_fd, "rb")
    results = os.fdopen(result_fd, "wb")
    send = protocol.send  # bound now: a candidate rebinding protocol.send later changes nothing here

    def emit(header, arrays=()):
        send(results, header, list(arrays))

    def stage(name: str) -> None:
        send(results, {"type": "stage", "stage": name}, [])

    import jax  # noqa: F401  the warm-up: everything a job needs, imported once
    from jax.experimental import pallas  # noqa: F401

    from ..judge import check_job, device_job, job_records, jobs, trace_job
    from ..judge.platform import load_platform

    #: each job kind's module (the device worker's run exported programs on the chip)
    run = {"reference": jobs.run_reference, "trace": trace_job.run_trace, "check": check_job.run_check,
           **device_job.JOBS}
    load_platform(platform_spec).warm_up()
    limit_memory(memory_mb)
    emit({"type": "ready", "pid": os.getpid(), "network": network, "platform": jax.default_backend()})
    while True:
        try:
            header, arrays = protocol.recv(job_in)
        except EOFError:
            return
        set_idle_priority(False)
        kind = header.get("kind")
        try:
            job = job_records.decode(header)
            run[job.KIND](job, arrays, emit, stage)
        except job_records.JobError as exc:
            emit({"type": "error", "message": str(exc)})
        except MemoryError:
            emit({"type": "error", "kind": "memory", "message": f"ran out of memory (limit {memory_mb} MiB beyond the warmed-up runtime)"})
        except BaseException as exc:  # report, then let the parent decide; SystemExit included
            import traceback

            emit({"type": "error", "kind": type(exc).__name__, "message": str(exc)[:1500],
                  "traceback": "".join(traceback.format_exception(exc, limit=-6))[-3000:]})
        retire = kind == "trace" or check_job.RETIRE
        emit({"type": "done", "retire": retire})  # said before it goes: the parent must not keep it for a next job
        if retire:
            os._exit(0)  # one candidate per process (a checker a failed run left unfit too): the parent replaces it


if __name__ == "__main__":
    main(sys.argv[1:])
