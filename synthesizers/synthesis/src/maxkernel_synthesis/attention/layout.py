"""Layout: what each axis of each operand is to the kernel (query, key, head dim, value dim, or a grid axis)."""

from __future__ import annotations

import math

from attrs import define

from ..ir import Declined
from .spec import Leaves, Operand
from .symbols import Coord, In, walk


#: the axis kinds an operand of each role must have
REQUIRED_AXES = (("q", "qd"), ("k", "kd"), ("v", "ke"))


@define
class Axes:
    """The attention's axes, each a tuple of the interpreter's leaf variables."""

    q_axis: tuple
    keys: tuple
    d_axis: tuple
    e_axis: tuple
    #: (position in q, axis) of every other axis of q: batch and head axes, one grid axis each
    grid: list[tuple[int, tuple]]


def find_axes(rec: Leaves, q_in: In, k_in: In, v_in: In, scores, dot1, keys: frozenset,
              contract1: frozenset) -> Axes:
    L = rec.L
    q_axes = [L(v) for v in q_in.vars]
    v_axes = [L(v) for v in v_in.vars]
    keys_t = next((ax for ax in (L(v) for v in k_in.vars) if ax and set(ax) == keys), None)
    if keys_t is None:
        raise Declined("the keys are not one axis of k")
    d_axes = [ax for ax in q_axes if ax and set(ax) <= contract1]
    if len(d_axes) != 1 or set(d_axes[0]) != contract1:
        raise Declined("the head dim q·kᵀ contracts over is not one axis of q")
    e_axis = _value_axis(q_axes, v_axes, keys)
    q_axis = _query_axis(rec, q_axes, d_axes[0], contract1, k_in, v_in, scores, dot1)
    grid = [(i, ax) for i, ax in enumerate(q_axes) if ax and ax != q_axis and ax != d_axes[0]]
    return Axes(q_axis, keys_t, d_axes[0], e_axis, grid)


def _value_axis(q_axes: list[tuple], v_axes: list[tuple], keys: frozenset) -> tuple:
    """The one axis of v that is neither a key axis nor an axis of q."""
    e_leaves = frozenset(x for ax in v_axes for x in ax) - keys - frozenset(x for ax in q_axes for x in ax)
    e_axes = [ax for ax in v_axes if ax and set(ax) <= e_leaves]
    if len(e_axes) != 1 or set(e_axes[0]) != e_leaves:
        raise Declined("the value dim is not one axis of v")
    return e_axes[0]


def _query_axis(rec: Leaves, q_axes: list[tuple], d_axis: tuple, contract1: frozenset, k_in: In, v_in: In,
                scores, dot1) -> tuple:
    """Any axis of q that k and v lack can be the blocked query axis (rows are independent; the others go to
    the grid, where a mask reads them as grid indices): the one the masks read, else the one next to the head
    dim, else the longest."""
    L = rec.L
    rows = [ax for ax in q_axes if ax and not set(ax) & contract1 and ax != d_axis]
    used = set()
    for n in walk(scores, {id(dot1)}):
        if isinstance(n, Coord):
            used |= set(L(n.var))
    kv_leaves = {x for n in (k_in, v_in) for v in n.vars for x in L(v)}
    candidates = [ax for ax in rows if not set(ax) & kv_leaves]
    if not candidates:
        raise Declined("no axis of q is a query axis (every axis of q is shared with k or v)")
    hit = [ax for ax in candidates if set(ax) & used]
    if len(hit) == 1:
        return hit[0]
    if len(q_axes) >= 2 and q_axes[-2] in candidates:
        return q_axes[-2]
    return max(candidates, key=lambda ax: math.prod(rec.ext(x) for x in ax))


class OperandReader:
    """Gives each axis of an operand its role against the attention's axes."""

    def __init__(self, rec: Leaves, axes: Axes) -> None:
        self.rec, self.axes = rec, axes

    def classify(self, leaves: tuple, allowed: str) -> tuple:
        if not leaves:
            return ("one",)
        a = self.axes
        for name, ax in (("q", a.q_axis), ("k", a.keys), ("d", a.d_axis), ("e", a.e_axis)):
            if leaves == ax and name in allowed:
                return (name,)
        for g, (_, ax) in enumerate(a.grid):
            part = _part_of(leaves, ax)
            if part is not None:
                return ("grid", g, part)
        raise Declined(f"an axis of extent {math.prod(self.rec.ext(x) for x in leaves)} of an operand is not a "
                       "batch, head, query, key or feature axis of q")

    def operand(self, role: str, n: In | None, allowed: str, axes_vars) -> Operand:
        L, rec = self.rec.L, self.rec
        leaves = [x for v in axes_vars for x in L(v)]
        if len(leaves) != len(set(leaves)):
            raise Declined(f"two axes of the {role} operand are lined up with each other (a transpose of it "
                           "meets it, as in x + x.T)")
        roles = [self.classify(L(v), allowed) for v in axes_vars]
        for name in "qkde":
            if sum(r == (name,) for r in roles) > 1:
                raise Declined(f"the {role} operand has two {name} axes")
        index = -1 if n is None else n.index
        shape = rec.out.shape if n is None else rec.input_vals[n.index].shape
        dtype = rec.out.node.dtype if n is None else n.dtype
        return Operand(role, index, roles, dtype, tuple(shape))


def _part_of(leaves: tuple, ax: tuple) -> str | None:
    """Which part of grid axis ``ax`` the leaves are ("full", "major", "minor"), None if they are not in it."""
    n = len(leaves)
    for start in range(len(ax) - n + 1):
        if ax[start:start + n] == leaves:
            part = "full" if n == len(ax) else "major" if start == 0 else "minor" if start + n == len(ax) else None
            if part is None:
                raise Declined("an operand holds a middle part of a q head axis")
            return part
    return None


def operands(rec: Leaves, axes: Axes, q_in: In, k_in: In, v_in: In, bias_ins: list[In]) -> tuple[list, list]:
    """(q, k, v, the biases, the output as Operands; the distinct bias inputs), or Declined."""
    reader = OperandReader(rec, axes)
    ops = [reader.operand("q", q_in, "qd", q_in.vars), reader.operand("k", k_in, "kd", k_in.vars),
           reader.operand("v", v_in, "ke", v_in.vars)]
    for role, need in REQUIRED_AXES:
        o = next(x for x in ops if x.role == role)
        if any((c,) not in o.roles for c in need):
            raise Declined(f"the {role} operand lacks its {'/'.join(need)} axes")
    seen_bias: list[In] = []
    for b in bias_ins:
        if not any(b is s for s in seen_bias):
            seen_bias.append(b)
            ops.append(reader.operand("bias", b, "qk", b.vars))
    out_op = reader.operand("out", None, "qe", rec.out.axes)
    grid_full = sorted(r[1] for r in out_op.roles if r[0] == "grid" and r[2] == "full")
    if ("q",) not in out_op.roles or ("e",) not in out_op.roles or grid_full != list(range(len(axes.grid))):
        raise Declined("the output is not [grid axes of q..., queries, value dim]")
    ops.append(out_op)
    if len({o.input for o in ops if o.role in ("q", "k", "v")}) != 3:
        raise Declined("q, k and v are not three different inputs")
    if any(o.input in (ops[0].input, ops[1].input, ops[2].input) for o in ops if o.role == "bias"):
        raise Declined("a bias is read from q, k or v")
    return ops, seen_bias
