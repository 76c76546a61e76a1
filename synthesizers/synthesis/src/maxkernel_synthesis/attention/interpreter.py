"""The symbolic interpreter: runs a jaxpr over axis variables and expression nodes."""

from __future__ import annotations

from ..ir import ELEMENTWISE, Declined, Program, flatten
from .axes import Vars
from .symbols import (
    Coord,
    Dot,
    Lit,
    Node,
    Op,
    Pos,
    Reduce,
    Val,
    _op,
    positions,
    substitute,
)

INDEXING = frozenset({"gather", "dynamic_slice", "dynamic_update_slice", "scatter", "scatter-add", "scatter_add",
                      "take_along_axis"})
IDENTITY = frozenset({"copy", "copy_p", "stop_gradient", "optimization_barrier"})


def _reshape_groups(ins: tuple, outs: tuple) -> list[tuple[list[int], list[int]]]:
    """Pair minimal groups of input and output axes with equal products (extent-1 axes left out)."""
    pin = [p for p, e in enumerate(ins) if e != 1]
    pout = [p for p, e in enumerate(outs) if e != 1]
    groups, i, j = [], 0, 0
    while i < len(pin) and j < len(pout):
        gi, gj = [pin[i]], [pout[j]]
        a, b = ins[pin[i]], outs[pout[j]]
        i, j = i + 1, j + 1
        while a != b:
            if a < b:
                gi.append(pin[i])
                a *= ins[pin[i]]
                i += 1
            else:
                gj.append(pout[j])
                b *= outs[pout[j]]
                j += 1
        groups.append((gi, gj))
    return groups


class Interpreter:
    def __init__(self) -> None:
        self.vars = Vars()

    def run(self, program: Program, args: list[Val]) -> list[Val]:
        env: dict[str, Val] = dict(zip(program.inputs, args, strict=False))

        def val(x) -> Val:
            if isinstance(x, str):
                return env[x]
            return Val(Lit(x), (), None)

        for eqn in program.eqns:
            outs = self.eqn(eqn, [val(x) for x in eqn.inputs])
            env.update(zip(eqn.outputs, outs, strict=False))
        return [val(o) for o in program.outputs]

    # -- helpers

    def _fresh(self, extent: int):
        return None if extent == 1 else self.vars.new(extent)

    def _bind(self, static: Val, axes: tuple) -> Node:
        """A position-only value as an expression of the variables of ``axes``."""
        return substitute(static.node, lambda i: Lit(0, "int32") if axes[i] is None else Coord(axes[i]))

    def _fit(self, v: Val, shape: tuple) -> Val:
        """Implicit broadcasting of extent-1 axes to ``shape`` (jaxprs allow it for elementwise ops)."""
        if not v.shape or v.shape == shape:
            return v
        if v.static:
            node = substitute(v.node, lambda i: Lit(0, "int32") if v.shape[i] == 1 else Pos(i))
            return Val(node, shape, None)
        return Val(v.node, shape, tuple(None if v.shape[i] == 1 else a for i, a in enumerate(v.axes)))

    # -- ops

    def eqn(self, eqn, ins: list[Val]) -> list[Val]:
        p = eqn.prim
        out_shape = tuple(eqn.out_shapes[0]) if eqn.out_shapes else ()
        dtype = eqn.out_dtypes[0] if eqn.out_dtypes else "float32"
        if p in INDEXING or p.startswith("scatter"):
            raise Declined(f"the reference reads through an index array ({p}: paged, ragged or gathered attention); "
                           "the flash template reads q, k and v in place")
        if p in IDENTITY:
            return ins[:1]
        if p in ELEMENTWISE:
            return [self.elementwise(p, ins, eqn.params, out_shape, dtype)]
        if p == "iota":
            return [Val(Pos(int(eqn.params["dimension"])), out_shape, None)]
        if p == "broadcast_in_dim":
            return [self.broadcast(ins[0], out_shape, tuple(eqn.params["broadcast_dimensions"]))]
        if p in ("reshape", "squeeze", "expand_dims"):
            if eqn.params.get("dimensions") is not None and p == "reshape":
                raise Declined("a reshape with a dimension order")
            return [self.reshape(ins[0], out_shape)]
        if p == "transpose":
            return [self.transpose(ins[0], tuple(eqn.params["permutation"]))]
        if p in ("reduce_sum", "reduce_max", "reduce_min"):
            return [self.reduce(p, ins[0], tuple(eqn.params["axes"]), dtype)]
        if p == "dot_general":
            return [self.dot(ins[0], ins[1], eqn.params["dimension_numbers"], out_shape, dtype)]
        if p == "scan":
            return self.scan(eqn, ins)
        if p in ("slice", "concatenate", "pad", "split"):
            raise Declined(f"the reference uses {p} (heads split into parts, ragged or padded sequences); the flash "
                           "template reads whole q, k and v axes")
        raise Declined(f"the reference uses {p}, which the flash template does not emit")

    def elementwise(self, prim, ins, params, shape, dtype) -> Val:
        ins = [self._fit(v, shape) for v in ins]
        if all(v.static for v in ins):
            return Val(_op(prim, [v.node for v in ins], params, dtype), shape, None)
        axes: list = [None] * len(shape)
        for v in ins:
            if v.static or not v.shape:
                continue
            for i, a in enumerate(v.axes):
                if a is not None:
                    axes[i] = a if axes[i] is None else self.vars.unify(axes[i], a)
        for v in ins:
            if v.static and v.shape:
                for i in positions(v.node):
                    if axes[i] is None:
                        axes[i] = self._fresh(shape[i])
        nodes = [self._bind(v, tuple(axes)) if v.static and v.shape else v.node for v in ins]
        return Val(_op(prim, nodes, params, dtype), shape, tuple(axes))

    def broadcast(self, v: Val, shape, dims) -> Val:
        if v.static:
            mapping = {i: Lit(0, "int32") if v.shape[i] == 1 else Pos(d) for i, d in enumerate(dims)}
            return Val(substitute(v.node, mapping.__getitem__), shape, None)
        axes: list = [None] * len(shape)
        for i, d in enumerate(dims):
            axes[d] = v.axes[i] if v.shape[i] == shape[d] else None
        return Val(v.node, shape, tuple(axes))

    def transpose(self, v: Val, perm) -> Val:
        shape = tuple(v.shape[i] for i in perm)
        if v.static:
            where = {src: dst for dst, src in enumerate(perm)}
            return Val(substitute(v.node, lambda i: Pos(where[i])), shape, None)
        return Val(v.node, shape, tuple(v.axes[i] for i in perm))

    def reshape(self, v: Val, shape) -> Val:
        groups = _reshape_groups(v.shape, shape)
        if v.static:
            mapping: dict[int, Node] = {i: Lit(0, "int32") for i, e in enumerate(v.shape) if e == 1}
            for gi, gj in groups:
                if len(gi) == 1:
                    expr, stride = None, 1
                    for j in reversed(gj):
                        term = Pos(j) if stride == 1 else Op("mul", (Pos(j), Lit(stride, "int32")), {}, "int32")
                        expr = term if expr is None else Op("add", (term, expr), {}, "int32")
                        stride *= shape[j]
                    mapping[gi[0]] = expr
                elif len(gj) == 1:
                    stride = 1
                    for i in reversed(gi):
                        q = Pos(gj[0]) if stride == 1 else Op("div", (Pos(gj[0]), Lit(stride, "int32")), {}, "int32")
                        mapping[i] = Op("rem", (q, Lit(v.shape[i], "int32")), {}, "int32") if i != gi[0] else q
                        stride *= v.shape[i]
                else:
                    raise Declined("a reshape of a position-only value regroups its axes")
            return Val(substitute(v.node, mapping.__getitem__), shape, None)
        axes: list = [None] * len(shape)
        for gi, gj in groups:
            src = [v.axes[i] for i in gi]
            if all(a is None for a in src):
                continue
            if len(gi) == 1:
                var = src[0]
            else:
                var = self.vars.merge([a if a is not None else self.vars.new(v.shape[i]) for a, i in zip(src, gi, strict=False)])
            if len(gj) == 1:
                axes[gj[0]] = var
            else:
                for j, sub in zip(gj, self.vars.split(var, [shape[j] for j in gj]), strict=False):
                    axes[j] = sub
        return Val(v.node, shape, tuple(axes))

    def reduce(self, prim, v: Val, axes_, dtype) -> Val:
        if v.static:
            raise Declined(f"{prim} of a position-only value")
        reduced = [v.axes[i] for i in axes_ if v.axes[i] is not None]
        if prim == "reduce_sum" and len(reduced) != sum(1 for i in axes_ if v.shape[i] != 1):
            raise Declined("a sum over a broadcast axis")
        shape = tuple(e for i, e in enumerate(v.shape) if i not in axes_)
        return Val(Reduce(prim, v.node, reduced, dtype), shape, tuple(a for i, a in enumerate(v.axes) if i not in axes_))

    def dot(self, lhs: Val, rhs: Val, dims, shape, dtype) -> Val:
        if lhs.static or rhs.static:
            raise Declined("a matmul with a position-only operand")
        (lc, rc), (lb, rb) = dims
        contract = []
        for i, j in zip(lc, rc, strict=False):
            a, b = lhs.axes[i], rhs.axes[j]
            if a is None or b is None:
                if lhs.shape[i] == 1:
                    continue
                raise Declined("a matmul contracts over a broadcast axis")
            contract.append(self.vars.unify(a, b))
        batch = []
        for i, j in zip(lb, rb, strict=False):
            a, b = lhs.axes[i], rhs.axes[j]
            batch.append(self.vars.unify(a, b) if a is not None and b is not None else (a if a is not None else b))
        lfree = [lhs.axes[i] for i in range(len(lhs.shape)) if i not in lc and i not in lb]
        rfree = [rhs.axes[i] for i in range(len(rhs.shape)) if i not in rc and i not in rb]
        node = Dot(lhs.node, rhs.node, contract, lfree, rfree, dtype)
        return Val(node, shape, tuple(batch + lfree + rfree))

    def scan(self, eqn, ins: list[Val]) -> list[Val]:
        params = eqn.params
        if params.get("num_carry", 0):
            raise Declined("a loop that carries state (a scan with a carry) is not re-derived; only lax.map-style "
                           "loops are read")
        if params.get("reverse"):
            raise Declined("a reversed scan")
        n, nc = int(params["length"]), int(params["num_consts"])
        t = self._fresh(n)
        sliced = list(ins[:nc])
        for v in ins[nc:]:
            if v.static:
                first = Lit(0, "int32") if t is None else Coord(t)
                node = substitute(v.node, lambda i, first=first: first if i == 0 else Pos(i - 1))
                sliced.append(Val(node, v.shape[1:], None))
                continue
            if v.axes[0] is not None and t is not None:
                self.vars.unify(v.axes[0], t)
            sliced.append(Val(v.node, v.shape[1:], v.axes[1:]))
        outs = self.run(flatten(params["jaxpr"]), sliced)
        result = []
        for o in outs:
            if o.static:
                raise Declined("a loop whose output depends on no input")
            result.append(Val(o.node, (n, *o.shape), (t, *o.axes)))
        return result


def count_dots(program: Program) -> int:
    """Matmuls in the program, inside lax.map loops too."""
    total = 0
    for eqn in program.eqns:
        if eqn.prim == "dot_general":
            total += 1
        elif eqn.prim == "scan" and "jaxpr" in eqn.params:
            total += count_dots(flatten(eqn.params["jaxpr"]))
    return total
