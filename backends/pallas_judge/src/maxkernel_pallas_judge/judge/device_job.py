"""The device worker's jobs: the one process on a host with the chip that opens it (``sandbox/pool.py``).

It runs exported programs only, never task or candidate Python:

* ``device_reference``: the task's full-size inputs (made by the trusted reference job on the CPU) go onto the
  chip and stay there; XLA's program of the reference, at the precision a user's ``jax.jit`` gets, is timed
  (``timing.py``) and its outputs kept; the same reference exported at the highest matmul precision runs once:
  the arbiter when a kernel and XLA disagree.
* ``device_check``: a candidate's full-size device program (the one the checker proved, compiled and checked
  on the CPU) runs on the held inputs: correctness at full size against XLA's outputs on the same chip, then
  the same timing as the reference's, and the outputs of the last timed call are checked again (a kernel that
  reads memory it never wrote can differ from call to call).

Held data lives as long as this process (one task at a time). A job that finds nothing held for its key says
``need_reference``; the parent sends the reference again (a fresh worker after a crash holds nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
from attrs import frozen
from jax import export

from .compare import compare, distance
from .errors import trim_error
from .platform import load_platform

Emit = Callable[..., None]


@frozen
class Held:
    """One task's reference on the chip: its inputs (device arrays) and the two references' outputs (host)."""

    key: str
    inputs: list[Any]
    xla: list[np.ndarray]
    exact: list[np.ndarray]


_held: dict[str, Held] = {}


def _load(blob: np.ndarray) -> export.Exported:
    return export.deserialize(bytearray(np.asarray(blob, dtype=np.uint8).tobytes()))


def _host(outputs: Any) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(outputs)]


def _trace_bytes(timing: dict[str, Any]) -> np.ndarray:
    return np.frombuffer(Path(timing.pop("trace_file")).read_bytes(), dtype=np.uint8)


def _device_kind() -> str:
    devices = jax.devices()
    return devices[0].device_kind if devices else ""


def run_device_reference(job: dict[str, Any], arrays: list[np.ndarray], emit: Emit,
                         stage: Callable[[str], None]) -> None:
    platform = load_platform(job["platform"])
    n = int(job["n_inputs"])
    _held.clear()  # one task's inputs on the chip at a time
    stage("reference inputs onto the chip")
    inputs = [jax.device_put(a) for a in arrays[:n]]
    xla_program, exact_program = _load(arrays[n]), _load(arrays[n + 1])
    stage("time the reference on the chip")
    timing, out = platform.time_on_device(xla_program.call, inputs, trace_root=Path(job["scratch"]) / "reference")
    xla = _host(out)
    stage("the high-precision reference on the chip")
    exact = _host(jax.jit(exact_program.call)(*inputs))
    _held[job["key"]] = Held(job["key"], inputs, xla, exact)
    xla_off = distance(exact, xla, job["atol"], job["rtol"])
    emit({"type": "device_reference", "key": job["key"], "device_kind": _device_kind(), "timing": timing,
          "xla_vs_exact": xla_off}, [_trace_bytes(timing)])


def chip_correctness(got: list[np.ndarray], held: Held, atol, rtol) -> dict[str, Any]:
    """Whether a kernel's full-size outputs on the chip are right, and who is wrong where it and XLA disagree.

    Right: within the task's tolerance of XLA's outputs; or, where it is not, within it of the
    highest-precision reference, or no farther from that reference than XLA's own outputs are (XLA's default
    precision is then the less accurate side). Wrong otherwise, with both distances named."""
    ok, why, _ = compare(held.xla, got, atol, rtol)
    if ok:
        return {"ok": True, "against": "xla"}
    kernel = distance(held.exact, got, atol, rtol)
    xla = distance(held.exact, held.xla, atol, rtol)
    base = {"xla_disagreement": why, "kernel_vs_exact": kernel, "xla_vs_exact": xla}
    if kernel["mismatched"] == 0:
        return {"ok": True, "against": "exact", "farther": "xla", **base}
    no_worse = (0 <= kernel["mismatched"] <= xla["mismatched"] and kernel["max_abs_error"] <= xla["max_abs_error"])
    if no_worse:
        return {"ok": True, "against": "exact", "farther": "xla", **base}
    return {"ok": False, "farther": "kernel", **base}


def run_device_check(job: dict[str, Any], arrays: list[np.ndarray], emit: Emit, stage: Callable[[str], None]) -> None:
    platform = load_platform(job["platform"])
    held = _held.get(job["key"])
    if held is None:
        emit({"type": "need_reference", "key": job["key"]})
        return
    program = _load(arrays[0])
    stage("correctness on the chip")
    try:
        first = _host(jax.jit(program.call)(*held.inputs))
    except Exception as exc:
        emit({"type": "chip_correctness", "ok": False, "error": trim_error(exc, "candidate.py")})
        return
    judged = chip_correctness(first, held, job["atol"], job["rtol"])
    emit({"type": "chip_correctness", **judged})
    if not judged["ok"]:
        return
    stage("timing on the chip")
    try:
        timing, out = platform.time_on_device(program.call, held.inputs, trace_root=Path(job["scratch"]) / "trace")
    except Exception as exc:
        emit({"type": "timing", "ok": False, "error": trim_error(exc, "candidate.py")})
        return
    last = _host(out)
    again = chip_correctness(last, held, job["atol"], job["rtol"])
    repeat = {"identical": all(a.tobytes() == b.tobytes() for a, b in zip(first, last, strict=False)),
              "ok": again["ok"], "detail": again}
    emit({"type": "timing", "ok": True, "device_kind": _device_kind(), "repeat": repeat, **timing},
         [_trace_bytes(timing)])


#: job kind -> runner (the worker's dispatch)
JOBS = {"device_reference": run_device_reference, "device_check": run_device_check}
