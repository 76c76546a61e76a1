"""Whether the programs a module traced are one program: at full size twice, and at full and check sizes.

The checker judges the full-size program by what it proves and compiles, and its outputs by the check-size
programs run on the CPU; nothing ties the two unless they are one program. A module may trace differently
each time it is called (a kernel that ignores its inputs on the first trace, the honest one after), or by the
shapes it is given. The two full-size traces must be identical (the same jaxpr, to its last literal); a
check-size trace with the full size's shapes must be identical to it too; one at other shapes must be the same
program up to shapes: as many kernels, each with the same kinds of operation in its body, and the same kinds
of arithmetic around them (data movement, which legitimately depends on shapes, aside). Counts and literal
values may follow the shapes (a loop unrolled over a shape's pages, ``1 / sqrt(d)``) and are not compared: a
module that adds one more of an operation it already has, or scales by a constant, only at the full size
passes this on a CPU, and is caught by the full-size run on the chip where there is one.

Also here: a program whose computation the platform selects at lowering (``lax.platform_dependent``) is refused
outright: its CPU program and its device program would be two programs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from jax._src import core

#: operations that only move or view data: their count may follow the shapes
MOVES = frozenset({"reshape", "broadcast_in_dim", "squeeze", "expand_dims", "transpose", "slice", "dynamic_slice",
                   "dynamic_update_slice", "concatenate", "pad", "iota", "copy", "copy_p", "rev", "pjit",
                   "closed_call", "core_call", "jit"})
PLATFORM_SELECTED = frozenset({"platform_index"})


def _subjaxprs(params: dict[str, Any]) -> Iterator[core.Jaxpr]:
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, core.ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, core.Jaxpr):
                yield item


def _walk(jaxpr: core.Jaxpr, ops: Counter, kernels: list[tuple]) -> None:
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "pallas_call":
            body: Counter = Counter()
            _walk(eqn.params["jaxpr"], body, kernels)
            kernels.append(tuple(sorted(body.items())))
            continue
        if name not in MOVES:
            ops[name] += 1
        for sub in _subjaxprs(eqn.params):
            _walk(sub, ops, kernels)


def structure(closed: core.ClosedJaxpr) -> tuple[frozenset, tuple]:
    """(the kinds of operation outside kernels; each kernel body's kinds of operation), shapes and data
    movement aside. Kinds, not counts: a kernel that unrolls a loop over pages or blocks in Python (an expert's
    paged attention) repeats its operations as many times as its shapes say."""
    ops: Counter = Counter()
    kernels: list[tuple] = []
    _walk(closed.jaxpr, ops, kernels)
    return frozenset(ops), tuple(sorted(tuple(sorted(name for name, _ in body)) for body in kernels))


def primitives(closed: core.ClosedJaxpr) -> set[str]:
    """Every primitive of the program, kernel bodies and nested programs included."""
    found: set[str] = set()

    def walk(jaxpr: core.Jaxpr) -> None:
        for eqn in jaxpr.eqns:
            found.add(eqn.primitive.name)
            for sub in _subjaxprs(eqn.params):
                walk(sub)

    walk(closed.jaxpr)
    return found


def _shapes(closed: core.ClosedJaxpr) -> list:
    return [(tuple(v.aval.shape), str(v.aval.dtype)) for v in closed.jaxpr.invars]


def _diff(full, other) -> str:
    added, missing = sorted(set(other) - set(full)), sorted(set(full) - set(other))
    parts = [f"{name} where the full size has none" for name in added] + [f"no {name}" for name in missing]
    return ", ".join(parts[:6]) or "the same operations, differently grouped"


def refusal(full: core.ClosedJaxpr, again: core.ClosedJaxpr, checks: dict[int, core.ClosedJaxpr]) -> str | None:
    """Why these traces are not one program, or None when they are."""
    if PLATFORM_SELECTED & primitives(full):
        return ("the program selects its computation by platform (lax.platform_dependent): its CPU and device "
                "programs would be two programs; write one program")
    if str(full) != str(again):
        return ("the module traced another program at full size the second time than the first: the program "
                "judged must be the one the module traces, every time")
    shape_full, (ops_full, kernels_full) = _shapes(full), structure(full)
    for size, closed in checks.items():
        if _shapes(closed) == shape_full:
            if str(closed) != str(full):
                return (f"the program traced for check size {size} has the full size's shapes but is not the "
                        "full-size program")
            continue
        ops, kernels = structure(closed)
        if len(kernels) != len(kernels_full):
            return (f"the program at check size {size} has {len(kernels)} kernels, the full-size program "
                    f"{len(kernels_full)}: the program checked must be the program timed")
        if kernels != kernels_full:
            which = next(i for i, (a, b) in enumerate(zip(kernels_full, kernels, strict=True)) if a != b)
            return (f"a kernel of the program at check size {size} is not the full-size program's (its body has "
                    f"{_diff(kernels_full[which], kernels[which])}): the program checked must be the program timed")
        if ops != ops_full:
            return (f"the program at check size {size} computes otherwise than the full-size program outside its "
                    f"kernels ({_diff(ops_full, ops)}): the program checked must be the program timed")
    return None
