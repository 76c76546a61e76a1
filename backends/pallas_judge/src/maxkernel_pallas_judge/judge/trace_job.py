"""The tracer: the one job in which the candidate's Python runs (inside the candidate's sandbox).

It imports the module and traces ``computation`` on abstract inputs
(``ShapeDtypeStruct``), once per size: the full size, each shape the
correctness sets use, and the full size again. No concrete input is ever sent
to this process, so the module has no data to recognise, cache or answer from.
Each captured jaxpr goes to the parent as bytes (``jaxpr_wire``); nothing is
lowered or exported here, where the candidate's code could run during it.
Nothing it reports decides a pass: the checker reads the jaxprs back with the
judge's own classes, and lowers, exports, counts, compiles and runs them
without the candidate (``check_job.py``).

What the tracer still says on its own authority: that its own program does
no kernel work (a fast refusal), and for a fit check, the kernel description
the cost model reads (a search's pruning, never a verdict).
"""

from __future__ import annotations

import os
import threading
import traceback
from pathlib import Path
from typing import Any
from collections.abc import Callable

import jax
import numpy as np

from . import inputs as task_inputs
from . import tripwire
from .job_records import TraceJob
from .platform import Platform, load_platform
from .work import work_stats

Emit = Callable[..., None]


def error_record(exc: BaseException, source_file: str | None = None) -> dict[str, Any]:
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if source_file and f.filename == source_file]
    where = mine[-1] if mine else (frames[-1] if frames else None)
    return {
        "type": type(exc).__name__,
        "message": (str(exc).replace(source_file, "candidate.py") if source_file else str(exc))[:1500],
        "line": where.lineno if mine else None,
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-4))[-2500:],
        "hint": _api_hint(exc),
    }


def _api_hint(exc: BaseException) -> str:
    """What the installed jax offers instead of a name or signature the candidate used (api_drift.py)."""
    from .api_drift import hint

    try:
        return hint(exc)[:400]
    except Exception:  # a hint must never cost the verdict its reason
        return ""


def _blob(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def _describe_for_cost_model(jaxpr, target: str, platform: Platform, emit: Emit) -> None:
    """The kernels' grid, blocks and work for the cost model; an estimate must never break a verdict."""
    try:
        emit({"type": "kernels", "kernels": platform.describe_kernels(jaxpr), "chip": platform.chip(target)})
    except Exception as exc:
        emit({"type": "kernels", "error": f"{type(exc).__name__}: {exc}"[:500]})


def leftovers(threads_before: set[int]) -> list[str]:
    """Threads or processes the module left running after its trace (they could act later)."""
    found = [f"thread {t.name!r}" for t in threading.enumerate()
             if t.ident not in threads_before and t.is_alive() and not t.name.startswith("tpu-compile")]
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in (me, 1) and (command := _parent(int(entry))) is not None:
            found.append(f"process {entry} ({command})")
    return found


def _parent(pid: int) -> str | None:
    """The command of a process this worker started (directly or not), None for unrelated ones."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        sid = int(stat[stat.rindex(")") + 2:].split()[3])
    except (OSError, ValueError, IndexError):
        return None
    # in bwrap's PID namespace every other process is the candidate's; outside it, same session only
    return comm if os.environ.get("MAXKERNEL_SANDBOX") == "bwrap" or sid == os.getsid(0) else None


def _trace(fn, shapes, static, target: str, platform: Platform):
    """The candidate's program on abstract inputs, traced as it would be on the target (``trace_context``: on a
    TPU, under the target's deviceless device, so a kernel that asks ``pltpu.get_tpu_info()`` for its chip at
    trace time gets the target's figures, not 'Unsupported TPU device kind: cpu')."""
    with platform.trace_context(target):
        return jax.make_jaxpr(lambda *d: fn(*d, *static))(*shapes)


def _load(source: str, emit: Emit, entry: str = "computation", wrap: str = ""):
    try:
        module = task_inputs.load_module(source, "candidate")
    except SystemExit as exc:
        emit({"type": "check", "name": "load", "ok": False, "error": {"type": "SystemExit",
              "message": f"the module called sys.exit({exc.code!r}) while being imported", "line": None}})
        return None
    except BaseException as exc:
        emit({"type": "check", "name": "load", "ok": False, "error": error_record(exc, source)})
        return None
    fn = getattr(module, "computation", None)
    if not callable(fn):  # a JAXBench-style candidate names its function as the task's workload does
        fn = getattr(module, entry, None)
    if not callable(fn) and wrap in ("kernelbench", "pytorch"):  # a KernelBench-style answer: class ModelNew
        fn = _kernelbench_entry(module, source, emit)
        if fn is False:
            return None
    if not callable(fn):
        names = "computation()" + (f" (or {entry}(), as the task's reference does)" if entry != "computation" else "")
        if wrap in ("kernelbench", "pytorch"):
            names = "computation() and no class ModelNew or Model (a KernelBench-style answer)"
        emit({"type": "check", "name": "load", "ok": False,
              "error": {"type": "MissingEntry", "message": f"the module defines no function {names}", "line": None}})
        return None
    return fn


def _kernelbench_entry(module, source: str, emit: Emit):
    """The judge's entry for a ModelNew/Model candidate; None when it has no such class, False when adding it
    failed (reported)."""
    from .task_module import add_kernelbench_entry

    try:
        return add_kernelbench_entry(module)
    except BaseException as exc:
        emit({"type": "check", "name": "load", "ok": False, "error": error_record(exc, source)})
        return False


def _abstract(spec: dict[str, Any]) -> tuple[list[jax.ShapeDtypeStruct], tuple]:
    shapes = [jax.ShapeDtypeStruct(tuple(s["shape"]), s["dtype"]) for s in spec["shapes"]]
    return shapes, task_inputs.decode_static(spec["static"])


def _watchers() -> list[tuple[Callable, Any]]:
    """The functions that watch the candidate, with their code now (a swapped ``__code__`` shows)."""
    funcs = [tripwire.snapshot, tripwire.changed, tripwire._identity, tripwire._watched, tripwire._lowering_rules,
             tripwire._judge_packages, leftovers, _parent]
    return [(f, f.__code__) for f in funcs]


def run_trace(job: TraceJob, arrays: list[np.ndarray], emit: Emit, stage: Callable[[str], None]) -> None:
    source = str(Path(job.scratch) / "candidate.py")
    platform = load_platform(job.platform)  # trusted: imported before the candidate is
    tripwire.watch(platform.watched)
    before = tripwire.snapshot()
    watchers = _watchers()  # compared here, in this running frame, whose own code cannot be swapped
    threads_before = {t.ident for t in threading.enumerate()}
    stage("import")
    fn = _load(source, emit, job.entry, job.wrap)
    if fn is None:
        return
    swapped = [f"{f.__module__}.{f.__qualname__}" for f, code in watchers if f.__code__ is not code]
    patched = swapped or tripwire.changed(before)
    emit({"type": "check", "name": "integrity", "ok": not patched, "patched": patched, "when": "import"})
    if patched:
        return
    sizes = [{"shapes": job.full_shapes, "static": job.static_full}, *job.check_sizes]
    if job.describe_only:  # a fit check: the full size's kernels are all it needs
        sizes = sizes[:1]
    traced = _trace_sizes(fn, sizes, job, platform, source, emit, stage)
    if traced is None:
        return
    left = leftovers(threads_before)
    patched = [f"{f.__module__}.{f.__qualname__}" for f, code in watchers if f.__code__ is not code]
    patched = patched or tripwire.changed(before)
    stats = work_stats(traced[0])  # the tracer's own count: a fast refusal of its own program, never a pass
    emit({"type": "check", "name": "trace", "ok": True, "work": stats, "leftovers": left, "patched": patched})
    if left or patched:
        return
    if job.describe_only:
        _describe_for_cost_model(traced[0], job.target, platform, emit)
        return
    if stats["pallas_calls"] == 0 or stats["callbacks"]:
        return  # the parent rejects it; sending it on would only waste time
    _send(traced, emit, stage, source)


def _trace_sizes(fn, sizes, job, platform: Platform, source: str, emit: Emit, stage) -> list | None:
    """The program at every size, and at the full size once more, last: the checker holds the two full-size
    traces against each other (a module that answers its first trace otherwise than its later ones)."""
    traced = []
    again = [] if job.describe_only else [sizes[0]]
    for index, spec in enumerate([*sizes, *again]):
        stage("trace" if index == 0 else "trace at full size again" if index == len(sizes) else
              f"trace, check size {index}")
        try:
            traced.append(_trace(fn, *_abstract(spec), job.target, platform))
        except BaseException as exc:
            failed = {"type": "check", "name": "trace", "ok": False, "size": index % len(sizes),
                      "error": error_record(exc, source)}
            if traced:  # the full size traced: its own count may refuse it whatever the check size did
                failed["work"] = work_stats(traced[0])
            emit(failed)
            return None
    return traced


def _send(traced, emit: Emit, stage: Callable[[str], None], source: str) -> None:
    """Each traced program as bytes the checker reads back with the judge's own classes (``jaxpr_wire``): the
    checker lowers, exports and runs them; nothing is lowered here, where the candidate's code lives."""
    from . import jaxpr_wire
    from .jaxpr_inline import inline_closed

    stage("send the programs")
    for index, closed in enumerate(traced):
        again = index == len(traced) - 1
        try:
            data = jaxpr_wire.dumps(inline_closed(closed))
        except Exception as exc:
            emit({"type": "check", "name": "export", "ok": False, "size": 0 if again else index,
                  "error": error_record(exc, source)})
            return
        emit({"type": "jaxpr", "size": 0 if again else index, "again": again}, [_blob(data)])
