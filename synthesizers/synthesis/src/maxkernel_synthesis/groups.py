"""Statistics over contiguous groups of a row (GroupNorm): the grouped view of the row analysis.

GroupNorm reshapes a row ``(rows, D)`` to ``(rows, G, S)`` and normalises each
group of ``S`` consecutive features. The groups never cross a block of the row
whose width is a multiple of ``S``, so a matmul's ``(bm, bn)`` output tile holds
whole groups and the statistics can be taken in its epilogue: no full-row
block, no HBM round trip for the matmul's output.

Two kinds join the row view's (``analysis.py``):

* ``grow``: a row value seen as ``(rows, G, S)`` (the same data as the row);
* ``gred``: a statistic per group, ``(rows, G, 1)`` or ``(rows, G)``.

In the kernel both are the 2-D ``(rows, D)`` block: a group statistic is kept
broadcast over its group's lanes, so the ops after it (the centring, the
division, the broadcast back to ``(rows, G, S)``) are the plain elementwise
lines ``emit.py`` writes. The reduction itself is a call of ``_group_reduce``,
which each chip's templates define (the TPU's: ``maxkernel_tpu_offline.group_reduce``).
"""

from __future__ import annotations

import math

from .ir import Declined, Eqn


def find_group(eqns: list[Eqn], rows: int, d: int) -> int | None:
    """The group size S of a reshape of rows into (rows, D // S, S) among ``eqns``, or None; a second, different
    S (two group norms with different groups) or an S that is not a power of 2 is declined."""
    sizes = set()
    for eqn in eqns:
        out = eqn.out_shapes[0] if eqn.out_shapes else ()
        if (eqn.prim == "reshape" and len(out) >= 2 and out[-1] != d and out[-1] > 1 and d % out[-1] == 0
                and out[-2] == d // out[-1] and math.prod(out) == rows * d):
            sizes.add(int(out[-1]))
    if not sizes:
        return None
    if len(sizes) > 1:
        raise Declined(f"groups of several sizes {sorted(sizes)} over one row (one group size is fused)")
    (size,) = sizes
    if size & (size - 1):
        raise Declined(f"groups of {size} features (the grouped statistics are taken by a butterfly over a power "
                       "of 2 of lanes)")
    return size


def group_kind(shape: tuple[int, ...], rows: int, d: int, group: int | None) -> str | None:
    """``grow`` or ``gred`` for a shape of the grouped view, else None."""
    if not group or len(shape) < 2:
        return None
    count = d // group
    if shape[-1] == group and shape[-2] == count and math.prod(shape) == rows * d:
        return "grow"
    if math.prod(shape) == rows * count and (shape[-1] == count or (shape[-1] == 1 and shape[-2] == count)):
        return "gred"
    return None


def check_grouped_op(eqn: Eqn, in_kinds: list[str], out_kind: str) -> None:
    """Decline an op that moves data between the grouped view and another view of the row in a way the 2-D
    block does not express."""
    if eqn.prim == "reshape" and {in_kinds[0], out_kind} not in ({"row", "grow"}, {"grow"}, {"gred"}):
        raise Declined(f"a reshape from the grouped view ({in_kinds[0]} to {out_kind}) that moves data across "
                       "groups")
    if out_kind == "gred" and "row" in in_kinds:
        raise Declined(f"{eqn.prim} turns a whole row into a per-group value")
    if out_kind in ("row", "rowred", "col") and "gred" in in_kinds:
        raise Declined(f"{eqn.prim} combines per-group statistics across groups (only the statistics of one "
                       "group are taken in a tile)")


def reduce_text(prim: str, arg: str, size: int) -> str:
    return f"_group_reduce({arg}, {prim.removeprefix('reduce_')!r}, {size})"
