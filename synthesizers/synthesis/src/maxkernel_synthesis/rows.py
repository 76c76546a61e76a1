"""The row view of a program: every value's kind relative to a 2-D ``(rows, D)`` view of the output.

Kinds: ``row`` (the full ``(..., D)`` shape, leading dims flattened into rows),
``rowred`` (reduced over the last axis), ``col`` (varies along D only: a bias),
``scalar``, and GroupNorm's ``grow``/``gred`` (groups.py). If every op keeps
rows independent, a row-blocked kernel computes it exactly; ``classify_rows``
gives the kinds or declines naming the op that mixes rows. An epilogue may also
end in one per-row value followed by ops the view cannot hold (``row_tail``),
or in one row reduction each N tile can take on its own
(``splittable_reduction``).
"""

from __future__ import annotations

import math

from attrs import define

from .groups import check_grouped_op, find_group, group_kind
from .ir import ELEMENTWISE, LAST_AXIS_REDUCTIONS, SHAPE_ONLY, Declined, Eqn, Program


def kind_of(shape: tuple[int, ...], rows: int, d: int) -> str:
    size = math.prod(shape)
    if size == 1:
        return "scalar"
    if shape and shape[-1] == d and size == rows * d:
        return "row"
    if size == rows and (not shape or shape[-1] != d or d == 1):
        return "rowred"
    if shape and shape[-1] == d and size == d:
        return "col"
    return "other"


def _check_row_gather(eqn: Eqn, program: Program, in_kinds: list[str], out_kind: str) -> None:
    """A gather is row-local when it picks one element of each row's last axis (``take_along_axis`` of a
    label per row, as cross-entropy does): the kernel selects it with a one-hot compare on the row."""
    dn, src = eqn.params["dimension_numbers"], program.shapes[eqn.inputs[0]]
    lead = tuple(range(len(src) - 1))
    last = (len(src) - 1,)
    if (in_kinds[:2] != ["row", "rowred"] or out_kind != "rowred" or tuple(dn.offset_dims) != ()
            or tuple(dn.collapsed_slice_dims) != last or tuple(dn.start_index_map) != last
            or tuple(getattr(dn, "operand_batching_dims", ())) != lead
            or tuple(getattr(dn, "start_indices_batching_dims", ())) != lead
            or any(size != 1 for size in eqn.params["slice_sizes"])):
        raise Declined(f"a gather from {src} that does not pick one element of each row's last axis (only "
                       "take_along_axis of one index per row keeps rows independent)")


@define
class RowPlan:
    """A program whose values all have row kinds relative to (rows, d)."""

    rows: int
    d: int
    kinds: dict[str, str]
    reductions: int
    #: GroupNorm's groups (groups.py): the group size, and the values that are per-group reductions
    group: int | None = None
    group_reductions: frozenset[str] = frozenset()


def classify_rows(program: Program, eqns: list[Eqn], seeds: dict[str, str], rows: int, d: int) -> RowPlan:
    """Give every value a kind, or decline naming the op that mixes rows."""
    kinds = dict(seeds)
    reductions, group_reductions = 0, set()
    group = find_group(eqns, rows, d)
    for eqn in eqns:
        in_kinds = [kinds.get(i, "scalar") if isinstance(i, str) else "scalar" for i in eqn.inputs]
        out_kind = kind_of(eqn.out_shapes[0], rows, d)
        if out_kind == "other":
            out_kind = group_kind(eqn.out_shapes[0], rows, d, group) or "other"
        if "other" in in_kinds or out_kind == "other":
            raise Declined(f"{eqn.prim} works on a shape {eqn.out_shapes[0]} that is not a row, a row statistic, "
                           f"a per-column parameter or a scalar of the ({rows}, {d}) row view")
        if out_kind == "col" and rows == d and "rowred" in in_kinds:
            out_kind = "rowred"  # rows == d: a (d,) value computed from row statistics is one of them
        if eqn.prim == "gather":
            _check_row_gather(eqn, program, in_kinds, out_kind)
        elif eqn.prim in LAST_AXIS_REDUCTIONS:
            out_kind = _reduced_kind(eqn, program, in_kinds[0])
            if out_kind == "gred":
                group_reductions.add(eqn.outputs[0])
            else:
                reductions += 1
        elif eqn.prim not in ELEMENTWISE and eqn.prim not in SHAPE_ONLY:
            raise Declined(f"the reference uses {eqn.prim}, which the row-wise templates do not emit")
        if {"grow", "gred"} & {*in_kinds, out_kind}:
            check_grouped_op(eqn, in_kinds, out_kind)
        elif (eqn.prim == "reshape" and in_kinds[0] != out_kind and {in_kinds[0], out_kind} != {"rowred"}
                and not (in_kinds[0] in ("rowred", "scalar") and out_kind in ("rowred", "scalar"))):
            raise Declined(f"a reshape from {program.shapes[eqn.inputs[0]]} to {eqn.out_shapes[0]} moves data "
                           "between rows")
        if len(eqn.outputs) != 1:
            raise Declined(f"{eqn.prim} has several outputs")
        kinds[eqn.outputs[0]] = out_kind
    return RowPlan(rows, d, kinds, reductions, group if group_reductions else None, frozenset(group_reductions))


def _reduced_kind(eqn: Eqn, program: Program, in_kind: str) -> str:
    """A last-axis reduction: of a row, a row's statistic; of a grouped row, a group's. Any other axis mixes
    rows (or groups)."""
    axes = tuple(eqn.params.get("axes", ()))
    src = program.shapes[eqn.inputs[0]]
    if in_kind not in ("row", "grow") or axes != (len(src) - 1,):
        raise Declined(f"{eqn.prim} over axes {axes} of {src} mixes rows (only last-axis reductions keep "
                       "rows independent)")
    if in_kind == "grow" and eqn.prim not in ("reduce_sum", "reduce_max", "reduce_min"):
        raise Declined(f"{eqn.prim} over a group (sums, maxima and minima of groups are fused)")
    return "gred" if in_kind == "grow" else "rowred"  # a statistic, even where rows == d reads as a column


def splittable_reduction(epilogue: list[Eqn], plan: RowPlan) -> str | None:
    """The reduction's primitive when the epilogue's only row reduction is a sum, max or min after which only
    shape ops follow (the kernel's output is that per-row value): a reduction over the row is the same reduction
    over each N tile's reduction."""
    computed = [e for e in epilogue if e.prim not in SHAPE_ONLY]
    if plan.reductions != 1 or not computed:
        return None
    last = computed[-1]
    rows_reduced = last.prim in ("reduce_sum", "reduce_max", "reduce_min") and last.outputs[0] not in plan.group_reductions
    return last.prim if rows_reduced else None


def row_tail(program: Program, index: int, seeds: dict[str, str], m: int, n: int):
    """(plan, tail_from, partial) for an epilogue that ends in one per-row value followed by ops the row view
    cannot hold (40k broadcasts its row minimum into a (1, C, B, 1) output): the kernel writes that value and
    the ops after it run on it in XLA. The longest such kernel part; None when there is none."""
    for start in range(len(program.eqns) - 1, index + 1, -1):
        head, tail = program.eqns[index + 1:start], program.eqns[start:]
        made = {out for eqn in head for out in eqn.outputs} | {program.eqns[index].outputs[0]}
        used = {x for eqn in tail for x in eqn.inputs if isinstance(x, str) and x in made}
        if len(used) != 1 or any(e.prim not in ELEMENTWISE and e.prim not in SHAPE_ONLY for e in tail):
            continue
        try:
            plan = classify_rows(program, head, seeds, m, n)
        except Declined:
            continue
        (partial,) = used
        if plan.kinds.get(partial) == "rowred":
            return plan, start, partial
    return None
