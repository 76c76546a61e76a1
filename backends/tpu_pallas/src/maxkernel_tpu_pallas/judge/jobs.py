"""The two jobs a worker runs: the task's reference (trusted) and a candidate (untrusted).

Each job reports through ``emit(header, arrays)`` as it goes, so when a
candidate hangs or kills its process the parent still knows which stage it
reached. No verdict is made here: the parent compares the outputs and applies
the rules (``evaluator.py``), so nothing the candidate patches in this process
can change the result.
"""

from __future__ import annotations

import hashlib
import traceback
from pathlib import Path
from typing import Any, Callable

import jax
import numpy as np

from . import inputs as task_inputs
from . import tripwire
from .compile import compile_for_target, start_compile
from .work import work_stats

Emit = Callable[..., None]


def _flat(outputs: Any) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(outputs)]


def _error(exc: BaseException, source_file: str | None = None) -> dict[str, Any]:
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if source_file and f.filename == source_file]
    where = mine[-1] if mine else (frames[-1] if frames else None)
    return {
        "type": type(exc).__name__,
        "message": (str(exc).replace(source_file, "candidate.py") if source_file else str(exc))[:1500],
        "line": where.lineno if mine else None,
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-4))[-2500:],
    }


def _on_tpu() -> bool:
    return jax.default_backend() == "tpu"


def _interpret():
    """Pallas TPU interpret mode on CPU; on a TPU the kernels run for real."""
    if _on_tpu():
        import contextlib

        return contextlib.nullcontext()
    from jax.experimental.pallas import tpu as pltpu

    return pltpu.force_tpu_interpret_mode(pltpu.InterpretParams())


def _describe_for_cost_model(jaxpr, target: str, emit: Emit) -> None:
    """The kernels' grid, blocks and work for the cost model; an estimate must never break a verdict."""
    from ..profiling.extract import chip_figures, describe_kernels

    try:
        emit({"type": "kernels", "kernels": describe_kernels(jaxpr), "chip": chip_figures(target)})
    except Exception as exc:
        emit({"type": "kernels", "error": f"{type(exc).__name__}: {exc}"[:500]})


def run_reference(job: dict[str, Any], arrays: list[np.ndarray], emit: Emit, stage: Callable[[str], None]) -> None:
    meta = job["task"]
    stage("import reference")
    module = task_inputs.load_module(meta["module"], "maxkernel_reference_task")
    fn = getattr(module, meta["entry"])
    stage("full-size shapes")
    shapes, static_full = task_inputs.abstract_full(module, meta)
    stage("trace reference")
    work = work_stats(jax.make_jaxpr(lambda *d: fn(*d, *static_full))(*shapes))
    flops = float(module.get_flops()) if meta.get("has_flops") else None
    stage("compile reference for the target")
    xla = compile_for_target(lambda *d: fn(*d, *static_full), shapes, job["target"], meta["module"])
    from ..profiling.extract import chip_figures

    xla["chip"] = chip_figures(job["target"])
    stage("input sets")
    full_bytes = sum(s.size * s.dtype.itemsize for s in shapes)
    note = ""
    if job["size"] == "full" and not _on_tpu() and full_bytes * (int(job["fresh"]) + 1) > job["max_full_input_bytes"]:
        sets = []  # too big to check in interpret mode: say so rather than pretend
        note = (f"the task has no small size and its full-size inputs ({full_bytes / 2**20:.0f} MiB) are too large "
                "for a CPU correctness run")
    else:
        sets = task_inputs.input_sets(module, meta, fresh=int(job["fresh"]), size=job["size"])
    emit({
        "type": "reference",
        "full_shapes": [{"shape": list(s.shape), "dtype": s.dtype.name} for s in shapes],
        "static_full": task_inputs.encode_static(static_full),
        "work": work,
        "flops": flops,
        "xla": xla,
        "sets": len(sets),
        "note": note,
        "platform": jax.default_backend(),
    })
    for i, s in enumerate(sets):
        stage(f"reference outputs, set {i}")
        # The expected values are the exact math: on a TPU, float32 matmuls default to one bf16
        # pass, and a kernel that really computes in float32 must not be judged against that.
        with jax.default_matmul_precision("highest"):
            outputs = _flat(jax.jit(lambda *d, _s=s["static"]: fn(*d, *_s))(*s["dynamic"]))
        dyn = [np.asarray(a) for a in s["dynamic"]]
        emit({"type": "reference_set", "index": i, "how": s["how"], "static": task_inputs.encode_static(s["static"]),
              "n_inputs": len(dyn)}, dyn + outputs)
    if _on_tpu() and job.get("timing"):
        from .timing import time_on_device

        stage("time reference")
        (dyn, static), *_ = task_inputs.call_inputs(module, meta, size="full", seed=None)
        timing, out = time_on_device(lambda *d: fn(*d, *static), dyn, trace_root=Path(job["scratch"]) / "ref-trace")
        emit({"type": "reference_timing", **timing}, _flat(out))


#: Every input set calls computation() afresh, so Python in the module runs each time
#: and state kept between calls (cached outputs, call counters) shows up. This set runs
#: as a plain eager call, exactly as a user calls it, so a module that caches concrete
#: arrays is caught by the traced sets after it. The traced sets reuse an executable
#: whose program is unchanged: the interpret-mode compile is most of a set's cost.
EAGER_SET = 1


def _correctness(fn, sets, arrays, source, emit, stage) -> bool:
    executables: dict[str, Any] = {}
    i = 0
    for index, spec in enumerate(sets):
        dyn = [jax.numpy.asarray(a) for a in arrays[i:i + spec["n_inputs"]]]
        i += spec["n_inputs"]
        static = task_inputs.decode_static(spec["static"])
        stage(f"correctness, set {index}")
        try:
            with _interpret():
                if index == EAGER_SET:
                    outputs = fn(*dyn, *static)
                else:
                    lowered = jax.jit(lambda *d: fn(*d, *static)).lower(*dyn)
                    key = hashlib.sha256(lowered.as_text().encode()).hexdigest()
                    if key not in executables:
                        executables[key] = lowered.compile()
                    outputs = executables[key](*dyn)
                outputs = _flat(outputs)
        except BaseException as exc:
            emit({"type": "outputs", "index": index, "error": _error(exc, source)})
            return False
        emit({"type": "outputs", "index": index}, outputs)
    return True


def run_candidate(job: dict[str, Any], arrays: list[np.ndarray], emit: Emit, stage: Callable[[str], None]) -> None:
    source = str(Path(job["scratch"]) / "candidate.py")
    before = tripwire.snapshot()

    stage("import")
    try:
        module = task_inputs.load_module(source, "candidate")
    except SystemExit as exc:
        emit({"type": "check", "name": "load", "ok": False, "error": {"type": "SystemExit",
              "message": f"the module called sys.exit({exc.code!r}) while being imported", "line": None}})
        return
    except BaseException as exc:
        emit({"type": "check", "name": "load", "ok": False, "error": _error(exc, source)})
        return
    fn = getattr(module, "computation", None)
    if not callable(fn):
        emit({"type": "check", "name": "load", "ok": False,
              "error": {"type": "MissingEntry", "message": "the module defines no function computation()", "line": None}})
        return
    patched = tripwire.changed(before)
    emit({"type": "check", "name": "integrity", "ok": not patched, "patched": patched, "when": "import"})
    if patched:
        return

    stage("trace")
    static_full = task_inputs.decode_static(job["static_full"])
    shapes = [jax.ShapeDtypeStruct(tuple(s["shape"]), s["dtype"]) for s in job["full_shapes"]]
    full_fn = lambda *d: fn(*d, *static_full)  # noqa: E731
    try:
        jaxpr = jax.make_jaxpr(full_fn)(*shapes)
        stats = work_stats(jaxpr)
    except BaseException as exc:
        emit({"type": "check", "name": "trace", "ok": False, "error": _error(exc, source)})
        return
    emit({"type": "check", "name": "trace", "ok": True, "work": stats})
    _describe_for_cost_model(jaxpr, job["target"], emit)
    if job.get("stop_unless_kernel") and (stats["pallas_calls"] == 0 or stats["callbacks"]):
        return  # the parent rejects it; compiling would only waste time

    stage("compile")
    pending = start_compile(full_fn, shapes, job["target"], source)
    if pending.done() and not pending.result()["ok"]:  # refused while lowering (block shapes): no need to run
        emit({"type": "check", "name": "compile", **pending.result()})
        return

    stage("correctness")
    correct = _correctness(fn, job["sets"], arrays, source, emit, stage)
    stage("compile")  # the compile's verdict comes first in the cascade: wait for it either way
    result = pending.result()
    emit({"type": "check", "name": "compile", **result})
    if not (result["ok"] and correct):
        return
    patched = tripwire.changed(before)
    emit({"type": "check", "name": "integrity", "ok": not patched, "patched": patched, "when": "calls"})
    if patched or not (_on_tpu() and job.get("timing")):
        return

    from .timing import time_on_device

    stage("timing")
    reference = task_inputs.load_module(job["task"]["module"], "maxkernel_reference_task")
    (dyn, static), *_ = task_inputs.call_inputs(reference, job["task"], size="full", seed=None)
    try:
        timing, out = time_on_device(lambda *d: fn(*d, *static), dyn, trace_root=Path(job["scratch"]) / "trace")
    except Exception as exc:
        emit({"type": "timing", "ok": False, "error": _error(exc, source)})
        return
    outputs = _flat(out)
    trace = np.frombuffer(Path(timing["trace_file"]).read_bytes(), dtype=np.uint8)  # the scratch dir dies with us
    emit({"type": "timing", "ok": True, "n_outputs": len(outputs), **timing}, [*outputs, trace])
