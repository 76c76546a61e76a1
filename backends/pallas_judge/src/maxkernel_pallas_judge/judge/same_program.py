"""Whether the programs a module traced are one program: at full size twice, and at a check size that has the
full size's shapes.

The checker judges the full-size program by what it proves and compiles, and its outputs by the check-size
programs run on the CPU; nothing ties the two unless they are one program. A module may trace differently
each time it is called (a kernel that ignores its inputs on the first trace, the honest one after): the tracer
traces the full size again after the check sizes, and the two full-size jaxprs must be identical, to their last
literal. A check size with the full size's shapes must trace that same program too.

At other shapes nothing structural is compared: an honest kernel specialises to its shapes (a K loop of one
step drops its accumulator's init and finalise branches, a Python loop over pages makes 4 kernels at one size
and 64 at another: the offline synthesizer's kernels did all of this, and a comparison by kinds of operation
refused 9 of them). Every size is proven on its own (the proof of kernel at each check size); a module that
computes otherwise at the full size by its shapes alone is caught by the full-size run on the chip, where
there is one, and not on a CPU host.

Also here: a program whose computation the platform selects at lowering (``lax.platform_dependent``) is refused
outright: its CPU program and its device program would be two programs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jax._src import core

PLATFORM_SELECTED = frozenset({"platform_index"})


def _subjaxprs(params: dict[str, Any]) -> Iterator[core.Jaxpr]:
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, core.ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, core.Jaxpr):
                yield item


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


def refusal(full: core.ClosedJaxpr, again: core.ClosedJaxpr, checks: dict[int, core.ClosedJaxpr]) -> str | None:
    """Why these traces are not one program, or None when they are."""
    if any(PLATFORM_SELECTED & primitives(closed) for closed in (full, again, *checks.values())):
        return ("the program selects its computation by platform (lax.platform_dependent): its CPU and device "
                "programs would be two programs; write one program")
    text, shapes = str(full), _shapes(full)
    if str(again) != text:
        return ("the module traced another program at full size the second time than the first: the program "
                f"judged must be the one the module traces, every time ({first_difference(full, again)})")
    for size, closed in checks.items():
        if _shapes(closed) == shapes and str(closed) != text:
            return (f"the program traced for check size {size} has the full size's shapes but is not the "
                    f"full-size program ({first_difference(full, closed)})")
    return None


def first_difference(one: core.ClosedJaxpr, other: core.ClosedJaxpr) -> str:
    """The first line where two programs' texts differ, both sides cut short: what a reader (or a maintainer
    chasing a refusal of an honest kernel) needs to see."""
    a, b = str(one).splitlines(), str(other).splitlines()
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"line {i + 1}: {x.strip()[:160]!r} against {y.strip()[:160]!r}"
    return f"{len(a)} lines against {len(b)}"
