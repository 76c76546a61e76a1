"""What a reference computes, read from its jaxpr at full size: which kernel template fits, or why none does.

The reference is traced with abstract full-size inputs (nothing is allocated),
calls (jit, custom_jvp/vjp such as ``jax.nn.gelu``) are inlined, and every
value is given a *kind* relative to a 2-D row view ``(rows, D)`` of the output:

* ``row``: the full ``(..., D)`` shape (leading dims flattened into rows);
* ``rowred``: reduced over the last axis (``(..., 1)`` or ``(...)``);
* ``col``: varies along D only (a bias or weight of shape ``(D,)``);
* ``scalar``: one value;
* ``grow``/``gred``: a row seen in GroupNorm's groups, and a group's statistic (groups.py).

The rules are rows.py's. If every op keeps rows independent (elementwise math, broadcasts, reductions
over the last axis), a row-blocked kernel computes it exactly: the *row-wise*
template. If one ``dot_general`` (M, K) @ (K, N) feeds such a chain, the
*matmul-with-epilogue* template applies, with kinds relative to (M, N).
Anything else is declined with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from attrs import define

from .attention import analyse_attention, count_dots
from .batch import batched_inputs
from .ir import Declined, Eqn, Program
from .rows import classify_rows, kind_of, row_tail, splittable_reduction

#: A chip's last resort when no fused template fits and no batch axis is proven independent (the TPU's: its
#: matmuls and convolutions alone on kernels, ``maxkernel_tpu_offline.staged``): the program and why the others
#: declined, to an analysis, or Declined.
LastResort = Callable[[Program, str], "Analysis"]


@define
class Analysis:
    template: str  # "rowwise" | "matmul_epilogue" | "attention" | "batch" | "staged"
    program: Program
    rows: int
    d: int
    kinds: dict[str, str]
    dot: Eqn | None = None
    reductions: int = 0
    why: str = ""
    attention: Any = None  # attention.AttentionSpec for the attention template
    staged: Any = None  # the chip's spec of its last-resort template (the TPU's StagedSpec)
    #: matmul_epilogue: the program input the kernel reads as the weight, and whether it is (N, K) (x @ W.T,
    #: PyTorch's Linear layout), contracted on its last dim by the MXU instead of transposed in HBM first
    rhs: str = ""
    rhs_transposed: bool = False
    #: rowwise reducing to one value (scalar_tail.py): the kernel runs eqns[:tail_from] and writes ``partial``
    #: per row; the rest runs after it on those values
    tail_from: int | None = None
    partial: str = ""
    #: GroupNorm's group size when the epilogue takes statistics over groups of the row (groups.py), and which
    #: values those statistics are
    group: int | None = None
    group_reductions: frozenset[str] = frozenset()
    #: matmul_epilogue whose one row reduction is its last op (40k's row minimum): each N tile writes its own
    #: partial (sum, max or min) and XLA combines the tiles' partials, so N need not be one block
    tile_reduction: str | None = None

    @property
    def full_rows(self) -> bool:
        """Whether a block must hold whole rows: the epilogue reduces over them and the reduction is not split."""
        return bool(self.reductions) and self.tile_reduction is None

    @property
    def output(self) -> str:
        """What the kernel writes: the program's output, or the per-row values a scalar tail reduces."""
        return self.partial or self.program.outputs[0]

    @property
    def kernel_eqns(self) -> list[Eqn]:
        return self.program.eqns if self.tail_from is None else self.program.eqns[:self.tail_from]


def analyse(program: Program, last_resort: LastResort | None = None) -> Analysis:
    """Choose a template for the program, or raise :class:`Declined` with the reason.

    The specific templates are tried first; when none fits, the fallback runs the
    whole computation per block of a batch axis proven independent; when there is
    none, the chip's ``last_resort`` (if it has one) is asked.
    """
    try:
        return _specific(program)
    except Declined as specific:
        try:
            batched = batched_inputs(program)
        except Declined as fallback:
            if last_resort is None:
                raise Declined(f"{specific}; and no batch fallback: {fallback}") from None
            try:
                return last_resort(program, f"{specific}; and no batch fallback: {fallback}")
            except Declined as last:
                raise Declined(f"{specific}; no batch fallback: {fallback}; and {last}") from None
        out = program.shapes[program.outputs[0]]
        kinds = {name: "batch" if b else "whole" for name, b in zip(program.inputs, batched, strict=False)}
        return Analysis("batch", program, out[0], 0, kinds,
                        why=f"no specific template fits ({specific}); the leading axis (extent {out[0]}) is proven "
                            "independent, so each grid step runs the whole computation on a block of it")


def _specific(program: Program) -> Analysis:
    if len(program.outputs) != 1 or not isinstance(program.outputs[0], str):
        raise Declined(f"the reference returns {len(program.outputs)} outputs; the templates write one")
    out_shape = program.shapes[program.outputs[0]]
    dots = [e for e in program.eqns if e.prim == "dot_general"]
    if any(e.prim == "conv_general_dilated" for e in program.eqns):
        raise Declined("a convolution (no fused template: convolutions are lowered by the staged one)")
    n_dots = count_dots(program)
    if n_dots == 2:  # q·kᵀ and ·v, possibly inside a lax.map over query chunks
        try:
            spec = analyse_attention(program)
        except Declined as exc:
            raise Declined(f"2 matmuls, and the attention template declines: {exc}") from None
        return Analysis("attention", program, spec.sq, spec.d, {}, attention=spec,
                        why=f"attention: q·kᵀ over a head dim of {spec.d}, a softmax over {spec.sk} keys, ·v, "
                            f"for {spec.sq} queries per (batch, head)")
    if n_dots > 2:
        raise Declined(f"{n_dots} matmuls (multi-GEMM computations, attention with its projections among them, need "
                       "their own template)")
    if not dots:
        d = out_shape[-1] if out_shape else 1
        rows = math.prod(out_shape) // d if out_shape else 1
        lead = max((program.shapes[name] for name in program.inputs), key=math.prod, default=())
        if len(lead) >= 2 and math.prod(out_shape) == math.prod(lead[:-1]):
            rows, d = math.prod(lead[:-1]), lead[-1]  # the output is a statistic of the largest input's rows
        if math.prod(out_shape) == 1 and len(lead) >= 2:
            return _reduced_to_one(program, math.prod(lead[:-1]), lead[-1])
        seeds = _seeds(program, rows, d)
        plan = classify_rows(program, program.eqns, seeds, rows, d)
        why = (f"rows are independent: {plan.reductions} reduction(s) over the last axis, the rest elementwise"
               if plan.reductions else "elementwise: every output element depends on the same element of the inputs")
        return Analysis("rowwise", program, rows, d, plan.kinds, reductions=plan.reductions, why=why,
                        group=plan.group, group_reductions=plan.group_reductions)
    return _matmul(program, dots[0])


def _seeds(program: Program, rows: int, d: int) -> dict[str, str]:
    """The inputs' kinds. Where rows == d a vector's shape says nothing (a column parameter and a per-row value
    are both (d,)): one broadcast along the rows (``a[:, None]``, broadcast dims (0,)) is per row."""
    seeds = {name: kind_of(program.shapes[name], rows, d) for name in program.inputs}
    if rows == d:
        for eqn in program.eqns:
            if (eqn.prim == "broadcast_in_dim" and seeds.get(eqn.inputs[0]) == "col"
                    and tuple(eqn.params["broadcast_dimensions"]) == (0,) and len(eqn.out_shapes[0]) == 2):
                seeds[eqn.inputs[0]] = "rowred"
    return seeds


def _reduced_to_one(program: Program, rows: int, d: int) -> Analysis:
    """One value reduced from rows (a loss): per-row statistics in the kernel, the rest as a tail."""
    from .scalar_tail import split

    found = split(program, rows, d)
    if found is None:
        raise Declined("the output is one value that is not a reduction of the inputs' rows")
    program, tail_from, partial = found
    seeds = _seeds(program, rows, d)
    plan = classify_rows(program, program.eqns[:tail_from], seeds, rows, d)
    if plan.kinds.get(partial) != "rowred":
        raise Declined(f"the value reduced to the output is not one per row ({program.shapes[partial]})")
    return Analysis("rowwise", program, rows, d, plan.kinds, reductions=plan.reductions, tail_from=tail_from,
                    partial=partial, why=f"one value reduced from independent rows: each row's statistic in the "
                    f"kernel ({plan.reductions} reduction(s) over the last axis), then "
                    f"{len(program.eqns) - tail_from} op(s) on the {rows} per-row values")


def _weight_layout(program: Program, dot: Eqn, before: list[Eqn]) -> tuple[str, bool, list[Eqn]]:
    """(the program input read as the weight, whether it is (N, K), the equations left before the matmul).

    ``x @ W.T`` traces as a transpose of W then a plain matmul: the transpose is folded into the kernel
    (its block index swaps, the MXU contracts W's last dim), so W is never rewritten in HBM."""
    (_, rc), _ = dot.params["dimension_numbers"]
    rhs = dot.inputs[1]
    if tuple(rc) == (1,):
        return rhs, True, before
    producer = next((e for e in before if rhs in e.outputs), None)
    if (producer is not None and producer.prim == "transpose" and tuple(producer.params["permutation"]) == (1, 0)
            and producer.inputs[0] in program.inputs):
        return producer.inputs[0], True, [e for e in before if e is not producer]
    return rhs, False, before


def _matmul(program: Program, dot: Eqn) -> Analysis:
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    lhs = dot.inputs[0]
    if lb or rb:
        raise Declined("a batched matmul (the template handles one (M, K) @ (K, N))")
    index = program.eqns.index(dot)
    rhs, transposed, before = _weight_layout(program, dot, program.eqns[:index])
    if lhs not in program.inputs or rhs not in program.inputs:
        raise Declined("the matmul's operands are computed first (a prologue before the matmul is not fused yet)")
    ls, rs = program.shapes[lhs], program.shapes[dot.inputs[1]]
    if len(ls) != 2 or len(rs) != 2 or tuple(lc) != (1,) or tuple(rc) not in ((0,), (1,)):
        raise Declined(f"matmul of {ls} and {rs} with contraction {lc}/{rc} is not a plain (M, K) @ (K, N)")
    m, n = ls[0], (rs[0] if tuple(rc) == (1,) else rs[1])
    if before:
        raise Declined(f"{before[0].prim} runs before the matmul (a prologue is not fused yet)")
    seeds = {name: kind_of(program.shapes[name], m, n) for name in program.inputs if name not in (lhs, rhs)}
    seeds[dot.outputs[0]] = "row"
    try:
        plan, tail_from, partial = classify_rows(program, program.eqns[index + 1:], seeds, m, n), None, ""
    except Declined as whole:
        found = row_tail(program, index, seeds, m, n)
        if found is None:
            raise whole from None
        plan, tail_from, partial = found
    layout = " (W stored (N, K), contracted on its last dim)" if transposed else ""
    grouped = (f" (statistics over groups of {plan.group} features taken per output tile)" if plan.group else "")
    fused = (tail_from or len(program.eqns)) - index - 1
    tail = (f"; the {len(program.eqns) - tail_from} op(s) after its per-row result run on those {m} values in XLA"
            if tail_from else "")
    why = (f"one matmul ({m}x{ls[1]} @ {ls[1]}x{n}{layout}) followed by {fused} "
           f"elementwise or row ops, fused as the epilogue at the last K step{grouped}{tail}")
    split = splittable_reduction(program.eqns[index + 1:tail_from], plan)
    if split:
        why += f"; its row {split.removeprefix('reduce_')} is taken per N tile and the tiles' results combined in XLA"
    return Analysis("matmul_epilogue", program, m, n, plan.kinds, dot=dot, reductions=plan.reductions, why=why,
                    rhs=rhs, rhs_transposed=transposed, group=plan.group, group_reductions=plan.group_reductions,
                    tail_from=tail_from, partial=partial, tile_reduction=split)
