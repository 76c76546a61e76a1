"""A small size for a task that has none, derived from its size constants (runs where the task's code runs).

Most KernelBench-style tasks give one size, often far too large for a CPU correctness run in
interpret mode (4096 x 393216 floats). Their sizes are module constants (``batch_size = 1024``,
``input_shape = (32768,)``, JAXBench's ``CONFIG``), so the module is run again with those
constants shrunk:

- a value ``v`` above ``m`` becomes ``m`` when ``m`` divides it, else ``m + v % m``: every power of
  two up to ``m`` divides the new value exactly when it divided the old one (a dim that was a
  multiple of 128 stays one, a ragged dim stays ragged by the same amount), and equal values stay
  equal (a square matrix stays square);
- values up to 8 (kernel sizes, strides, dims, groups) never change;
- different values stay different and in the same order (a batch of 32768 and a width of 4096 do
  not both become 512, which would make rows and columns indistinguishable): a value that would
  meet or pass a smaller one's new value is raised by multiples of ``m``, keeping its residue;
- ``m`` goes down from 1024 until one input set is under ``SMALL_SET_BYTES``: the gentlest
  shrink that is small enough, so the check stays as close to the full size as it can; a candidate
  that fails there is checked once more at a gentler size, up to the CPU's full-size limit
  (``Evaluator.evaluate``): a block size hard-coded for the full size (128 rows of each of 8 groups)
  can need more than the smallest shrink keeps, and a kernel that runs right closer to the full size
  is not refused for a size it never meets;
- a constant the computation itself reads (``groups`` in a forward, ``CONFIG['num_heads']`` in a
  workload) keeps its value: it is part of what is computed, and a candidate that copied the
  reference keeps the full-size value;
- a shrink that breaks the module (a reshape that needed the old ratio) is tried constant by
  constant, keeping those that still trace.

The full size is still what is compiled, proven and timed; only correctness uses this size, and
the verdict names it.
"""

from __future__ import annotations

from typing import Any

import jax

from . import inputs as task_inputs
from .task_module import load_task_module, size_constants

#: The shrink levels, gentlest first.
LEVELS = (1024, 512, 256, 128, 64, 32, 16, 8)
#: A derived size aims at one input set (weights included) of at most this many bytes.
SMALL_SET_BYTES = 4 << 20


def shrink(value: Any, m: int) -> Any:
    if isinstance(value, tuple):
        return tuple(shrink(v, m) for v in value)
    if value <= m:
        return value
    return m if value % m == 0 else m + value % m


def set_bytes(shapes) -> int:
    return sum(s.size * s.dtype.itemsize for s in shapes)


def _try(meta: dict[str, Any], overrides: dict[str, Any], tag: str):
    """(module, input bytes) when the task's module still makes inputs and traces at these constants, else None."""
    try:
        module = load_task_module(meta, f"maxkernel_small_{abs(hash(meta['module']))}_{tag}", overrides)
        shapes, static = task_inputs.abstract_full(module, meta)
        fn = getattr(module, meta["entry"])
        jax.eval_shape(lambda *d: fn(*d, *static), *shapes)
    except Exception:
        return None
    return module, set_bytes(shapes)


def _ints(value: Any) -> list[int]:
    return [i for v in value for i in _ints(v)] if isinstance(value, tuple) else [value]


def ordered_shrink(constants: dict[str, Any], m: int) -> dict[str, Any]:
    """Every constant shrunk at level m, distinct values kept distinct and in order (raised by multiples of m)."""
    new: dict[int, int] = {}
    for value in sorted({i for v in constants.values() for i in _ints(v)}):
        small = shrink(value, m)
        floor = max(new.values(), default=0)
        if new and small <= floor:
            small += m * ((floor - small) // m + 1)
        new[value] = min(small, value)

    def apply(value: Any) -> Any:
        return tuple(apply(v) for v in value) if isinstance(value, tuple) else new[value]

    return {k: apply(v) for k, v in constants.items()}


def _at_level(meta, constants, m: int):
    """The module at shrink level m (all constants, else those that keep it working, largest first)."""
    shrunk = ordered_shrink(constants, m)
    wanted = {k: v for k, v in shrunk.items() if v != constants[k]}
    if not wanted:
        return None
    whole = _try(meta, wanted, str(m))
    if whole is not None:
        return wanted, *whole
    kept: dict[str, Any] = {}
    best = None
    for name in sorted(wanted, key=lambda k: -_largest(constants[k])):
        tried = _try(meta, {**kept, name: wanted[name]}, f"{m}_{len(kept)}")
        if tried is not None:
            kept[name] = wanted[name]
            best = (dict(kept), *tried)
    return best


def _largest(value: Any) -> int:
    return max(value) if isinstance(value, tuple) else value


def derive(meta: dict[str, Any], full_bytes: int, set_bytes_aim: int = SMALL_SET_BYTES
           ) -> tuple[Any, str] | tuple[None, str]:
    """(module at the derived size, what changed) or (None, why no small size could be derived): the gentlest
    shrink with one input set of at most ``set_bytes_aim`` (else the smallest that works)."""
    from pathlib import Path

    from .task_module import module_source, read_by_computation

    fixed = read_by_computation(Path(meta["module"]).read_text())
    constants = {k: v for k, v in size_constants(module_source(meta)).items() if k not in fixed}
    scalable = {k: v for k, v in constants.items() if _largest(v) > LEVELS[-1]}
    if not scalable:
        return None, "the module has no size constants above 8 to shrink (sizes written inside its functions)"
    best = None
    for m in LEVELS:
        found = _at_level(meta, constants, m)
        if found is None:
            continue
        overrides, module, nbytes = found
        if nbytes < full_bytes and (best is None or nbytes < best[2]):
            best = found
        if nbytes <= set_bytes_aim:
            break
    if best is None:
        return None, "shrinking its size constants breaks the module at every level"
    overrides, module, nbytes = best
    changed = ", ".join(f"{k} {constants[k]}->{v}" for k, v in overrides.items())
    return module, f"a derived small size ({changed}; {nbytes / 2**20:.2f} MiB per input set)"
