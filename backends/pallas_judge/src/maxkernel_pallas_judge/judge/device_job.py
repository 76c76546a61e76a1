"""The device worker's jobs: the one process on a host with the chip that opens it (``sandbox/pool.py``).

It runs exported programs only, never task or candidate Python, and decides nothing: it sends outputs and
times back, each message of its record (``device_messages.py``), and the parent judges them (``chip_verdict.py``).

* ``device_reference``: the task's full-size inputs (made by the trusted reference job on the CPU) go onto the
  chip and stay there; XLA's program of the reference, at the precision a user's ``jax.jit`` gets, is timed
  (``timing.py``) and its outputs kept on the chip for as long as the task is held, so their memory is never
  handed to a candidate's output; the same reference exported at the highest matmul precision runs once: the
  arbiter when a kernel and XLA disagree. Both references' outputs go back to the parent. An arbiter that
  cannot run there (f32 temporaries over the chip's memory, say) is said so and left out: a kernel is then
  right only where it matches XLA. With ``restore`` (a
  task put back on the chip for a check after another task held it) only the inputs and XLA's outputs go on
  the chip: the reference was timed and its outputs sent when it was first held.
* ``device_check``: a candidate's full-size device program (the one the checker proved and compiled) runs on
  the task's inputs and on a set drawn afresh on the chip for this candidate alone (its floating-point inputs
  redrawn with the same mean and spread from a key no candidate can know: no earlier program's outputs, left in
  freed memory, are right for it); XLA's and the high-precision reference's outputs for that set are computed
  beside it. The candidate's outputs go back to the parent. Then the timed calls, alternating between the two
  sets; each kept timed call's outputs are held against the candidate's own first outputs for its set.

Held data lives as long as this process (one task at a time). A job that finds nothing held for its key says
``need_reference``; the parent sends the reference again (a fresh worker after a crash holds nothing).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from attrs import frozen
from jax import export

from .errors import trim_error
from .job_records import DeviceCheckJob, DeviceReferenceJob
from .platform import load_platform

Emit = Callable[..., None]
#: Above this many bytes of inputs a task is checked on its own inputs alone (a fresh set would not fit).
FRESH_LIMIT = 4 << 30


@frozen
class Held:
    """One task's reference on the chip: its inputs, XLA's programs and outputs (device arrays, kept alive)."""

    key: str
    inputs: list[Any]
    xla: Any
    exact: Any  # None: the highest-precision reference could not run on the chip
    xla_outputs: list[Any]


_held: dict[str, Held] = {}


def _load(blob: np.ndarray) -> export.Exported:
    return export.deserialize(bytearray(np.asarray(blob, dtype=np.uint8).tobytes()))


def _leaves(outputs: Any) -> list[Any]:
    return list(jax.tree_util.tree_leaves(outputs))


def _host(outputs: list[Any]) -> list[np.ndarray]:
    return [np.asarray(x) for x in outputs]


def _device_kind() -> str:
    devices = jax.devices()
    return devices[0].device_kind if devices else ""


def run_device_reference(job: DeviceReferenceJob, arrays: list[np.ndarray], emit: Emit,
                         stage: Callable[[str], None]) -> None:
    platform = load_platform(job.platform)
    n = job.n_inputs
    _held.clear()  # one task's inputs on the chip at a time
    stage("reference inputs onto the chip")
    inputs = [jax.device_put(a) for a in arrays[:n]]
    xla, exact = jax.jit(_load(arrays[n]).call), jax.jit(_load(arrays[n + 1]).call)
    if job.restore:  # put back for a check: timed and judged when first held, sent back then
        stage("the reference's outputs on the chip")
        xla_out = _leaves(xla(*inputs))
        _held[job.key] = Held(job.key, inputs, xla, exact if job.arbiter else None, xla_out)
        emit({"type": "device_reference", "key": job.key, "device_kind": _device_kind(), "restored": True})
        return
    stage("time the reference on the chip")
    timing, _ = platform.time_on_device(xla, [inputs], trace_root=Path(job.scratch), stage=stage)
    stage("the reference's outputs on the chip")
    xla_out = _leaves(xla(*inputs))
    stage("the high-precision reference on the chip")
    try:
        exact_out, exact_error = _host(_leaves(exact(*inputs))), None
    except Exception as exc:  # its f32 temporaries can exceed the chip's memory where XLA's own program fits
        exact, exact_out, exact_error = None, [], trim_error(exc, "reference")
    _held[job.key] = Held(job.key, inputs, xla, exact, xla_out)
    trace = np.frombuffer(timing.pop("trace"), dtype=np.uint8)
    emit({"type": "device_reference", "key": job.key, "device_kind": _device_kind(), "timing": timing,
          "n_outputs": len(xla_out), "exact_error": exact_error}, [trace, *_host(xla_out), *exact_out])


def _fresh_set(inputs: list[Any]) -> list[Any] | None:
    """The task's inputs with every floating-point array redrawn (same shape, dtype, mean and spread) from a
    key drawn here; integers (indices, lengths, page tables) kept. None when another set would not fit."""
    if sum(int(x.size) * x.dtype.itemsize for x in inputs) > FRESH_LIMIT:
        return None
    key = jax.random.key(secrets.randbits(31))
    fresh = []
    for i, x in enumerate(inputs):
        if jnp.issubdtype(x.dtype, jnp.floating) and x.size:
            wide = x.astype(jnp.float32)
            mean, spread = jnp.mean(wide), jnp.std(wide)
            drawn = jax.random.normal(jax.random.fold_in(key, i), x.shape, jnp.float32)
            fresh.append((drawn * jnp.where(spread > 0, spread, 1.0) + mean).astype(x.dtype))
        else:
            fresh.append(x)
    return fresh


@jax.jit
def _differs(got, want, atol, rtol):
    """How many values of ``got`` are off ``want`` beyond the tolerance (NaN/Inf must sit where they sit)."""
    finite = jnp.isfinite(want)
    wide_got, wide_want = got.astype(jnp.float32), want.astype(jnp.float32)
    off = jnp.abs(wide_got - wide_want) > atol + rtol * jnp.abs(wide_want)
    bad = jnp.where(finite, off | ~jnp.isfinite(wide_got), ~(jnp.isnan(wide_got) == jnp.isnan(wide_want)))
    return jnp.sum(bad)


def _count_off(outputs: list[Any], first: list[Any], atol: float, rtol: float) -> int:
    if len(outputs) != len(first):
        return -1
    return int(sum(int(_differs(o, f, atol, rtol)) for o, f in zip(outputs, first, strict=True)))


def _arbiter_on(held: Held, inputs: list[Any]) -> list[np.ndarray] | None:
    """The highest-precision reference's outputs on ``inputs``, or None where it is left out or cannot run now
    (the fresh set and the candidate's outputs share the chip's memory with it): the parent is told."""
    if held.exact is None:
        return None
    try:
        return _host(_leaves(held.exact(*inputs)))
    except Exception:
        return None


def run_device_check(job: DeviceCheckJob, arrays: list[np.ndarray], emit: Emit, stage: Callable[[str], None]) -> None:
    platform = load_platform(job.platform)
    held = _held.get(job.key)
    if held is None:
        emit({"type": "need_reference", "key": job.key})
        return
    stage("the full-size program on the chip")
    try:
        program = jax.jit(_load(arrays[0]).call)
        sets = [held.inputs] + [s for s in [_fresh_set(held.inputs)] if s is not None]
        first = [_leaves(program(*s)) for s in sets]
    except Exception as exc:
        emit({"type": "chip_outputs", "error": trim_error(exc, "candidate.py")})
        return
    beside, exact = [], held.exact is not None
    if len(sets) > 1:  # the references on the fresh set, for the parent to judge the candidate's outputs by
        stage("the references on the fresh set")
        beside = _host(_leaves(held.xla(*sets[1])))
        wide = _arbiter_on(held, sets[1])
        exact = wide is not None
        beside += wide or []
    stage("outputs back to the parent")
    emit({"type": "chip_outputs", "sets": len(sets), "n_outputs": len(first[0]), "exact": exact,
          "n_reference": len(held.xla_outputs)},
         [*(a for outs in first for a in _host(outs)), *beside])
    stage("timing on the chip")
    try:
        timing, kept = platform.time_on_device(program, sets, trace_root=Path(job.scratch), stage=stage)
    except Exception as exc:
        emit({"type": "timing", "ok": False, "error": trim_error(exc, "candidate.py")})
        return
    stage("timed calls against the first")
    off = [_count_off(_leaves(out), first[which], job.atol, job.rtol) for which, out in kept]
    trace = np.frombuffer(timing.pop("trace"), dtype=np.uint8)
    emit({"type": "timing", "ok": True, "device_kind": _device_kind(), "calls_checked": len(off),
          "calls_differ": sum(1 for n in off if n != 0), "timing": timing}, [trace])


#: job kind -> runner (the worker's dispatch)
JOBS = {"device_reference": run_device_reference, "device_check": run_device_check}
