"""Attention-shaped references: find q·kᵀ → softmax over the keys → ·v in the jaxpr, for the flash template.

The reference is run through a small symbolic interpreter. Every array axis
is a *variable* in a union-find: an elementwise op unifies the axes it lines
up, a matmul unifies the axes it contracts or batches over, a reshape splits a
variable into sub-variables or merges several, a ``lax.map`` (a scan with no
carry) is read as a vmap whose iteration variable is the mapped axis. Values
that do not depend on any input (``iota`` positions, masks) are kept as
expressions of their positions and become expressions of the variables where
they meet the data. At the end every variable resolves to *leaves* (its finest
split), so the query positions of a reference that walks over query chunks are
the leaves (chunk index, position in chunk) of q's sequence axis.

The computation is then matched as a tree: an output that is (up to dtype
casts) ``dot(P, v)`` with ``P = exp(S - M) / sum_keys(exp(S - M))`` (or the
normalisation after the matmul), ``M`` constant along the keys (any row
statistic: softmax is shift-invariant), ``S`` an elementwise expression of one
``dot(q, k)`` contracting the head dim, of additive biases read from inputs, of
masks built from positions, and of constants. The keys are the leaves the
softmax sums over, which must be the leaves the second matmul contracts and
the first matmul's free leaves on the k side. Every axis of q, k, v, the
biases and the output is then one of: a grid axis of the kernel (batch, heads;
k and v may hold a contiguous part of a q head axis: grouped-query attention),
the query axis, the key axis, the head dim, the value dim, or of extent 1.

Anything else is declined with the reason.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from attrs import define, field

from .analysis import ELEMENTWISE, Declined, Program, flatten
from .emit import BINARY, UNARY, literal

#: a fill value at or below this (or -inf) masks a score out
NEG_THRESHOLD = -1e9
INDEXING = frozenset({"gather", "dynamic_slice", "dynamic_update_slice", "scatter", "scatter-add", "scatter_add",
                      "take_along_axis"})
IDENTITY = frozenset({"copy", "copy_p", "stop_gradient", "optimization_barrier"})
FOLD = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
        "neg": np.negative, "exp": np.exp, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
        "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
        "ge": np.greater_equal, "and": np.logical_and, "or": np.logical_or, "not": np.logical_not,
        "select_n": lambda p, *cases: cases[int(p)]}


# ---------------------------------------------------------------- axis variables


class Vars:
    """Union-find over axis variables; a variable may be split into sub-variables (major to minor)."""

    def __init__(self) -> None:
        self.parent: list[int] = []
        self.extent: list[int] = []
        self.children: dict[int, list[int]] = {}

    def new(self, extent: int) -> int:
        self.parent.append(len(self.parent))
        self.extent.append(int(extent))
        return len(self.parent) - 1

    def find(self, v: int) -> int:
        while self.parent[v] != v:
            self.parent[v] = self.parent[self.parent[v]]
            v = self.parent[v]
        return v

    def unify(self, a: int, b: int) -> int:
        a, b = self.find(a), self.find(b)
        if a == b:
            return a
        if self.extent[a] != self.extent[b]:
            raise Declined(f"axes of extents {self.extent[a]} and {self.extent[b]} are lined up")
        ca, cb = self.children.get(a), self.children.get(b)
        if ca is not None and cb is not None:
            la, lb = self.leaves(a), self.leaves(b)
            if [self.extent[x] for x in la] != [self.extent[x] for x in lb]:
                pieces = self._common([self.extent[x] for x in la], [self.extent[x] for x in lb])
                la = [y for x in self._refine(la, pieces) for y in x]
                lb = [y for x in self._refine(lb, pieces) for y in x]
            self.parent[b] = a
            for x, y in zip(la, lb):
                self.unify(x, y)
            return self.find(a)
        if cb is not None:
            a, b = b, a
        self.parent[b] = a
        return a

    def leaves(self, v: int) -> tuple[int, ...]:
        v = self.find(v)
        kids = self.children.get(v)
        if kids is None:
            return (v,)
        return tuple(leaf for k in kids for leaf in self.leaves(k))

    def _split_leaf(self, v: int, extents: list[int]) -> list[int]:
        v = self.find(v)
        kids = [self.new(e) for e in extents]
        self.children[v] = kids
        return kids

    @staticmethod
    def _common(a: list[int], b: list[int]) -> list[int]:
        """The common refinement of two factorisations of one extent (major to minor), when one exists."""
        bounds_a, bounds_b, acc = set(), set(), 1
        for e in reversed(a):
            acc *= e
            bounds_a.add(acc)
        acc = 1
        for e in reversed(b):
            acc *= e
            bounds_b.add(acc)
        bounds = sorted(bounds_a | bounds_b)
        out, prev = [], 1
        for bound in bounds:
            if bound % prev:
                raise Declined("a reshape regroups an axis in a way that is not a refinement")
            out.append(bound // prev)
            prev = bound
        return list(reversed(out))

    def _refine(self, leaves: list[int], pieces: list[int]) -> list[list[int]]:
        """Split ``leaves`` so that their extents become ``pieces`` (a refinement)."""
        out, i = [], 0
        for leaf in leaves:
            e, group, prod = self.extent[leaf], [], 1
            while prod < e:
                group.append(pieces[i])
                prod *= pieces[i]
                i += 1
            out.append(self._split_leaf(leaf, group) if len(group) > 1 else [leaf])
        return out

    def split(self, v: int, extents: list[int]) -> list[int]:
        """Sub-variables of ``v`` with these extents (major to minor)."""
        v = self.find(v)
        if v not in self.children:
            return self._split_leaf(v, extents)
        leaves = list(self.leaves(v))
        pieces = self._common([self.extent[x] for x in leaves], extents)
        fine = [y for x in self._refine(leaves, pieces) for y in x]
        out, i = [], 0
        for e in extents:
            group, prod = [], 1
            while prod < e:
                group.append(fine[i])
                prod *= self.extent[fine[i]]
                i += 1
            out.append(group[0] if len(group) == 1 else self.merge(group))
        return out

    def merge(self, vs: list[int]) -> int:
        v = self.new(math.prod(self.extent[self.find(x)] for x in vs))
        self.children[v] = [self.find(x) for x in vs]
        return v


# ---------------------------------------------------------------- symbolic values


class Node:
    """An expression node; identity is the node object (a jaxpr value maps to one node)."""

    dtype: str = "float32"


class Lit(Node):
    def __init__(self, value, dtype: str | None = None):
        array = np.asarray(value)
        self.value = array.item() if array.shape == () else value
        self.dtype = dtype or str(array.dtype)


class Pos(Node):
    """The position along axis ``i`` of a value that depends on no input (an iota)."""

    def __init__(self, i: int):
        self.i, self.dtype = i, "int32"


class Coord(Node):
    """The coordinate along an axis variable."""

    def __init__(self, var: int):
        self.var, self.dtype = var, "int32"


class In(Node):
    def __init__(self, index: int, vars_: tuple, dtype: str):
        self.index, self.vars, self.dtype = index, vars_, dtype


class Op(Node):
    def __init__(self, prim: str, args: tuple, params: dict, dtype: str):
        self.prim, self.args, self.params, self.dtype = prim, tuple(args), params, dtype


class Dot(Node):
    def __init__(self, lhs, rhs, contract: list[int], lhs_free: list, rhs_free: list, dtype: str):
        self.lhs, self.rhs, self.contract, self.dtype = lhs, rhs, contract, dtype
        self.lhs_free, self.rhs_free = lhs_free, rhs_free


class Reduce(Node):
    def __init__(self, prim: str, arg, vars_: list[int], dtype: str):
        self.prim, self.arg, self.vars, self.dtype = prim, arg, vars_, dtype


@define
class Val:
    node: Node
    shape: tuple[int, ...]
    axes: tuple | None  # one variable (or None: constant along it) per axis; None for position-only values

    @property
    def static(self) -> bool:
        return self.axes is None


def _children(node: Node) -> tuple:
    if isinstance(node, Op):
        return node.args
    if isinstance(node, Dot):
        return (node.lhs, node.rhs)
    if isinstance(node, Reduce):
        return (node.arg,)
    return ()


def walk(node: Node, stop=()):
    """Every node of the expression once, leaves first; nodes whose id is in ``stop`` are not entered."""
    seen, order, stack = set(), [], [(node, False)]
    while stack:
        n, done = stack.pop()
        if done:
            order.append(n)
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.append((n, True))
        if id(n) not in stop:
            stack.extend((c, False) for c in reversed(_children(n)))
    return order


def substitute(node: Node, mapping) -> Node:
    """Replace ``Pos`` leaves: ``mapping(i)`` gives the new node."""
    memo: dict[int, Node] = {}
    for n in walk(node):
        if isinstance(n, Pos):
            memo[id(n)] = mapping(n.i)
        elif isinstance(n, Op):
            args = tuple(memo[id(a)] for a in n.args)
            memo[id(n)] = n if all(a is b for a, b in zip(args, n.args)) else _op(n.prim, args, n.params, n.dtype)
        else:
            memo[id(n)] = n
    return memo[id(node)]


def positions(node: Node) -> set[int]:
    return {n.i for n in walk(node) if isinstance(n, Pos)}


def _jnp_dtype(dtype: str) -> str:
    return "jnp.bool_" if dtype == "bool" else f"jnp.{dtype}"


def _np_dtype(dtype: str):
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, dtype, dtype))


def _op(prim: str, args, params: dict, dtype: str) -> Node:
    """An op node, folded when every argument is a literal (and ``where(p, True, False)`` is ``p``)."""
    if prim == "select_n" and len(args) == 3 and all(isinstance(a, Lit) and a.dtype == "bool" for a in args[1:]):
        cases = (bool(args[1].value), bool(args[2].value))
        if cases == (False, True):
            return args[0]
        if cases == (True, False):
            return _op("not", (args[0],), {}, "bool")
    if prim in ("and", "or") and dtype == "bool" and len(args) == 2:
        for lit, other in ((args[0], args[1]), (args[1], args[0])):
            if isinstance(lit, Lit) and not isinstance(other, Lit):
                keeps = bool(lit.value) == (prim == "and")  # True & x, False | x
                return other if keeps else lit
    if all(isinstance(a, Lit) for a in args):
        try:
            if prim == "convert_element_type":
                return Lit(np.asarray(args[0].value).astype(_np_dtype(dtype)).item(), dtype)
            values = [np.float64(a.value) if "float" in a.dtype else a.value for a in args]
            with np.errstate(all="ignore"):
                if prim in FOLD:
                    return Lit(np.asarray(FOLD[prim](*values)).astype(_np_dtype(dtype)).item(), dtype)
                if prim == "div":
                    return Lit(values[0] / values[1] if "float" in dtype else int(values[0] / values[1]), dtype)
                if prim == "rem" and "int" in dtype:
                    return Lit(int(math.fmod(values[0], values[1])), dtype)
        except (TypeError, ValueError):
            pass
    return Op(prim, args, params, dtype)


# ---------------------------------------------------------------- the interpreter


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
        env: dict[str, Val] = dict(zip(program.inputs, args))

        def val(x) -> Val:
            if isinstance(x, str):
                return env[x]
            return Val(Lit(x), (), None)

        for eqn in program.eqns:
            outs = self.eqn(eqn, [val(x) for x in eqn.inputs])
            env.update(zip(eqn.outputs, outs))
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
                var = self.vars.merge([a if a is not None else self.vars.new(v.shape[i]) for a, i in zip(src, gi)])
            if len(gj) == 1:
                axes[gj[0]] = var
            else:
                for j, sub in zip(gj, self.vars.split(var, [shape[j] for j in gj])):
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
        for i, j in zip(lc, rc):
            a, b = lhs.axes[i], rhs.axes[j]
            if a is None or b is None:
                if lhs.shape[i] == 1:
                    continue
                raise Declined("a matmul contracts over a broadcast axis")
            contract.append(self.vars.unify(a, b))
        batch = []
        for i, j in zip(lb, rb):
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
                node = substitute(v.node, lambda i: first if i == 0 else Pos(i - 1))
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


# ---------------------------------------------------------------- recognition


@define
class Operand:
    """One array the kernel reads or writes, as the kernel sees it."""

    role: str  # q | k | v | bias | out
    input: int  # position among the reference's arguments (-1 for the output)
    roles: list[tuple]  # per array axis: ("grid", g, part) | ("q",) | ("k",) | ("d",) | ("e",) | ("one",)
    dtype: str
    shape: tuple[int, ...]


@define
class Clause:
    """``a * q + b * k + c >= 0`` over the query and key positions."""

    a: int
    b: int
    c: int


@define
class AttentionSpec:
    operands: list[Operand]
    grid: list[tuple[int, int]]  # (q axis holding the grid axis, extent at full size)
    sq: int
    sk: int
    d: int
    e: int
    q_lines: list[str]
    k_lines: list[str]
    v_lines: list[str]
    score_lines: list[str]
    out_lines: list[str]
    dot1_dtype: str
    p_dtype: str
    dot2_dtype: str
    out_dtype: str
    clauses: list[Clause]
    skip: bool  # fully masked blocks may be skipped (and the k blocks clamped)
    constants: list[float]  # the numbers in the lines, in order ({c0}, {c1}, ...)
    features: list[str] = field(factory=list)
    n_score_ops: int = 0
    #: Python conditions on the block bounds q_lo, q_hi, k_lo, k_hi (with placeholders): some key visible,
    #: every key visible; and the first and last visible key of a query block (from q_lo, q_hi), or None
    visible: str = "True"
    full: str = "False"
    k_first: str | None = None
    k_last: str | None = None

    def operand(self, role: str) -> Operand:
        return next(o for o in self.operands if o.role == role)

    @property
    def biases(self) -> list[Operand]:
        return [o for o in self.operands if o.role == "bias"]


def _strip(node: Node) -> Node:
    while isinstance(node, Op) and node.prim == "convert_element_type":
        node = node.args[0]
    return node


def _is_neg(node: Node) -> bool:
    node = _strip(node)
    return isinstance(node, Lit) and "float" in node.dtype and float(node.value) <= NEG_THRESHOLD


class Recognizer:
    def __init__(self, interp: Interpreter, program: Program, out: Val, input_vals: list[Val]):
        self.interp, self.vars = interp, interp.vars
        self.program, self.out, self.input_vals = program, out, input_vals
        self.memo: dict[int, frozenset] = {}

    def L(self, var) -> tuple:
        return () if var is None else self.vars.leaves(var)

    def ext(self, leaf: int) -> int:
        return self.vars.extent[leaf]

    def deps(self, node: Node) -> frozenset:
        for n in walk(node):
            if id(n) in self.memo:
                continue
            if isinstance(n, Coord):
                d = frozenset(self.L(n.var))
            elif isinstance(n, In):
                d = frozenset(x for v in n.vars for x in self.L(v))
            elif isinstance(n, Dot):
                d = (self.memo[id(n.lhs)] | self.memo[id(n.rhs)]) - {x for v in n.contract for x in self.L(v)}
            elif isinstance(n, Reduce):
                d = self.memo[id(n.arg)] - {x for v in n.vars for x in self.L(v)}
            elif isinstance(n, Op):
                d = frozenset().union(*[self.memo[id(a)] for a in n.args])
            else:
                d = frozenset()
            self.memo[id(n)] = d
        return self.memo[id(node)]

    # -- matching the softmax and the two matmuls

    def match(self) -> AttentionSpec:
        out = self.out
        node, epilogue = out.node, []
        while isinstance(node, Op) and node.prim != "select_n" and \
                len([a for a in node.args if not isinstance(a, Lit)]) == 1:
            epilogue.append(node)
            node = next(a for a in node.args if not isinstance(a, Lit))
        norm_after = None
        if isinstance(node, Op) and node.prim == "div" and isinstance(_strip(node.args[0]), Dot):
            norm_after, node = node.args[1], _strip(node.args[0])
        if not isinstance(node, Dot):
            raise Declined("the output is not a matmul of softmax weights with v")
        dot2 = node
        for p_side, v_side in ((dot2.lhs, dot2.rhs), (dot2.rhs, dot2.lhs)):
            weights = self._weights(p_side, norm_after)
            if weights is not None:
                break
        else:
            raise Declined("no softmax (exp(s - max) / sum exp) feeds the second matmul")
        _, keys_reduce, scores = weights
        keys = frozenset(x for v in keys_reduce for x in self.L(v))
        contracted = frozenset(x for v in dot2.contract for x in self.L(v))
        if keys != contracted:
            raise Declined(f"the softmax normalises over {self._describe(keys)}, but the second matmul contracts "
                           f"over {self._describe(contracted)}: a softmax over an axis that is not the key axis")
        dots = [n for n in walk(scores) if isinstance(n, Dot)]
        if len(dots) != 1 or any(isinstance(n, Reduce) for n in walk(scores)):
            raise Declined("the scores are not one q·kᵀ matmul followed by elementwise ops")
        dot1 = dots[0]
        contract1 = frozenset(x for v in dot1.contract for x in self.L(v))
        sides = [self.deps(side) - contract1 for side in (dot1.lhs, dot1.rhs)]
        if sides[1] & keys and not sides[0] & keys:
            q_node, k_node = dot1.lhs, dot1.rhs
        elif sides[0] & keys and not sides[1] & keys:
            q_node, k_node = dot1.rhs, dot1.lhs
        else:
            raise Declined("the first matmul's free axes do not separate queries from keys")
        q_in, k_in, v_in = (self._single_input(n, what) for n, what in ((q_node, "q"), (k_node, "k"), (v_side, "v")))
        k_free = self.deps(k_node) - contract1 - self.deps(q_node)
        if k_free != keys:
            raise Declined(f"the first matmul's key-side free axes ({self._describe(k_free)}) are not the axes the "
                           f"softmax normalises over ({self._describe(keys)})")
        return self._layout(q_in, k_in, v_in, q_node, k_node, v_side, dot1, dot2, scores, keys, contract1,
                            epilogue, p_side)

    def _weights(self, p_side: Node, norm_after):
        """(exp node, the softmax's key variables, the scores) when ``p_side`` is softmax weights."""
        node = _strip(p_side)
        if norm_after is None:
            if isinstance(node, Op) and node.prim == "div":
                e, total = node.args
            elif isinstance(node, Op) and node.prim == "mul":
                e, total = node.args
                r = _strip(total)
                if isinstance(r, Op) and r.prim == "div" and isinstance(_strip(r.args[0]), Lit) and \
                        float(_strip(r.args[0]).value) == 1.0:
                    total = r.args[1]
                else:
                    return None
            else:
                return None
        else:
            e, total = node, norm_after
        total = _strip(total)
        if not (isinstance(total, Reduce) and total.prim == "reduce_sum" and _strip(total.arg) is _strip(e)):
            return None
        e = _strip(e)
        if not (isinstance(e, Op) and e.prim == "exp"):
            return None
        x = _strip(e.args[0])
        keys = frozenset(v for var in total.vars for v in self.L(var))
        if isinstance(x, Op) and x.prim == "sub" and not (self.deps(x.args[1]) & keys):
            scores = x.args[0]
        else:
            scores = e.args[0]
        return e, total.vars, scores

    def _single_input(self, node: Node, what: str) -> In:
        nodes = walk(node)
        leaves = [n for n in nodes if isinstance(n, In)]
        if any(isinstance(n, (Coord, Pos)) for n in nodes):
            raise Declined(f"the {what} operand depends on positions (a positional prologue such as RoPE is not "
                           "fused)")
        if len(leaves) != 1 or any(isinstance(n, (Dot, Reduce)) for n in nodes):
            raise Declined(f"the {what} operand is computed from {len(leaves)} inputs with "
                           f"{sum(isinstance(n, (Dot, Reduce)) for n in nodes)} matmuls or reductions (a projection "
                           "or normalisation before the attention is not fused)")
        return leaves[0]

    def _describe(self, leaves) -> str:
        return "axes of extent " + "x".join(str(self.ext(x)) for x in sorted(leaves)) if leaves else "nothing"

    # -- layout: what each axis of each operand is to the kernel

    def _layout(self, q_in, k_in, v_in, q_node, k_node, v_node, dot1, dot2, scores, keys, contract1, epilogue,
                p_side) -> AttentionSpec:
        L = self.L
        q_axes = [L(v) for v in q_in.vars]
        v_axes = [L(v) for v in v_in.vars]
        keys_t = next((ax for ax in (L(v) for v in k_in.vars) if ax and set(ax) == keys), None)
        if keys_t is None:
            raise Declined("the keys are not one axis of k")
        d_axes = [ax for ax in q_axes if ax and set(ax) <= contract1]
        if len(d_axes) != 1 or set(d_axes[0]) != contract1:
            raise Declined("the head dim q·kᵀ contracts over is not one axis of q")
        out_deps = self.deps(self.out.node)
        e_leaves = frozenset(x for ax in v_axes for x in ax) - keys - frozenset(x for ax in q_axes for x in ax)
        e_axes = [ax for ax in v_axes if ax and set(ax) <= e_leaves]
        if len(e_axes) != 1 or set(e_axes[0]) != e_leaves:
            raise Declined("the value dim is not one axis of v")
        rows = [ax for ax in q_axes if ax and not set(ax) & contract1 and ax != d_axes[0]]
        # the query axis: the one the masks and biases index, else the one next to the head dim
        bias_ins = [n for n in walk(scores, {id(dot1)}) if isinstance(n, In)]
        # Any axis of q that k and v lack can be the blocked query axis (rows are independent; the others go
        # to the grid, where a mask reads them as grid indices): the one the masks read, else the one next to
        # the head dim, else the longest.
        used = set()
        for n in walk(scores, {id(dot1)}):
            if isinstance(n, Coord):
                used |= set(L(n.var))
        kv_leaves = {x for n in (k_in, v_in) for v in n.vars for x in L(v)}
        candidates = [ax for ax in rows if not set(ax) & kv_leaves]
        if not candidates:
            raise Declined("no axis of q is a query axis (every axis of q is shared with k or v)")
        hit = [ax for ax in candidates if set(ax) & used]
        q_axis = hit[0] if len(hit) == 1 else (
            q_axes[-2] if len(q_axes) >= 2 and q_axes[-2] in candidates else
            max(candidates, key=lambda ax: math.prod(self.ext(x) for x in ax)))
        grid_axes = [(i, ax) for i, ax in enumerate(q_axes) if ax and ax != q_axis and ax != d_axes[0]]

        def classify(leaves: tuple, allowed: str) -> tuple:
            if not leaves:
                return ("one",)
            for name, ax in (("q", q_axis), ("k", keys_t), ("d", d_axes[0]), ("e", e_axes[0])):
                if leaves == ax and name in allowed:
                    return (name,)
            for g, (_, ax) in enumerate(grid_axes):
                n = len(leaves)
                for start in range(len(ax) - n + 1):
                    if ax[start:start + n] == leaves:
                        part = "full" if n == len(ax) else "major" if start == 0 else \
                            "minor" if start + n == len(ax) else None
                        if part is None:
                            raise Declined("an operand holds a middle part of a q head axis")
                        return ("grid", g, part)
            raise Declined(f"an axis of extent {math.prod(self.ext(x) for x in leaves)} of an operand is not a "
                           "batch, head, query, key or feature axis of q")

        def operand(role: str, n: In | None, allowed: str, axes_vars) -> Operand:
            leaves = [x for v in axes_vars for x in L(v)]
            if len(leaves) != len(set(leaves)):
                raise Declined(f"two axes of the {role} operand are lined up with each other (a transpose of it "
                               "meets it, as in x + x.T)")
            roles = [classify(L(v), allowed) for v in axes_vars]
            for name in "qkde":
                if sum(r == (name,) for r in roles) > 1:
                    raise Declined(f"the {role} operand has two {name} axes")
            index = -1 if n is None else n.index
            shape = self.out.shape if n is None else self.input_vals[n.index].shape
            dtype = self.out.node.dtype if n is None else n.dtype
            return Operand(role, index, roles, dtype, tuple(shape))

        ops = [operand("q", q_in, "qd", q_in.vars), operand("k", k_in, "kd", k_in.vars),
               operand("v", v_in, "ke", v_in.vars)]
        for role, need in (("q", "qd"), ("k", "kd"), ("v", "ke")):
            o = next(x for x in ops if x.role == role)
            if any((c,) not in o.roles for c in need):
                raise Declined(f"the {role} operand lacks its {'/'.join(need)} axes")
        seen_bias: list[In] = []
        for b in bias_ins:
            if any(b is s for s in seen_bias):
                continue
            seen_bias.append(b)
            ops.append(operand("bias", b, "qk", b.vars))
        out_op = operand("out", None, "qe", self.out.axes)
        if ("q",) not in out_op.roles or ("e",) not in out_op.roles or \
                sorted(r[1] for r in out_op.roles if r[0] == "grid" and r[2] == "full") != list(range(len(grid_axes))):
            raise Declined("the output is not [grid axes of q..., queries, value dim]")
        ops.append(out_op)
        if len({o.input for o in ops if o.role in ("q", "k", "v")}) != 3:
            raise Declined("q, k and v are not three different inputs")
        if any(o.input in (ops[0].input, ops[1].input, ops[2].input) for o in ops if o.role == "bias"):
            raise Declined("a bias is read from q, k or v")

        emitter = Emitter(self, q_axis, keys_t, grid_axes, {id(b): f"b{i}" for i, b in enumerate(seen_bias)})
        q_lines, qn = emitter.prologue(q_node, q_in, "q")
        k_lines, kn = emitter.prologue(k_node, k_in, "k")
        v_lines, vn = emitter.prologue(v_node, v_in, "v")
        clauses, droppable = emitter.mask(scores)
        score_lines = emitter.scores(scores, dot1, droppable)
        out_lines = emitter.epilogue(list(reversed(epilogue)))
        skip = bool(clauses) and self._skippable(scores, clauses, q_axis, keys_t, complete=len(droppable) > 0)
        conditions = emitter.conditions(clauses)
        sq, sk = (math.prod(self.ext(x) for x in ax) for ax in (q_axis, keys_t))
        features = []
        if any(r[0] == "grid" and r[2] != "full" for o in ops if o.role in ("k", "v") for r in o.roles):
            features.append("grouped-query attention (each kv head serves several q heads; the index map picks it)")
        if clauses:
            features.append("mask " + " and ".join(_clause_text(c) for c in clauses) +
                            (", fully masked blocks skipped" if skip else ""))
        for b in ops:
            if b.role == "bias":
                features.append(f"bias input {b.input} of shape {list(b.shape)} read per (q, k) tile")
        return AttentionSpec(
            operands=ops, grid=[(i, math.prod(self.ext(x) for x in ax)) for i, ax in grid_axes], sq=sq, sk=sk,
            d=math.prod(self.ext(x) for x in d_axes[0]), e=math.prod(self.ext(x) for x in e_axes[0]),
            q_lines=q_lines + [f"q = {qn}"], k_lines=k_lines + [f"k = {kn}"], v_lines=v_lines + [f"v = {vn}"],
            score_lines=score_lines, out_lines=out_lines, dot1_dtype=dot1.dtype,
            p_dtype=p_side.dtype,
            dot2_dtype=dot2.dtype, out_dtype=self.out.node.dtype, clauses=clauses, skip=skip,
            constants=emitter.constants, features=features, n_score_ops=emitter.n_ops, **conditions)

    def _skippable(self, scores, clauses, q_axis, k_axis, complete: bool) -> bool:
        """Skipping a fully masked block is exact when the fill is -inf, or when the clauses are the whole mask
        and every query row keeps a key (a finite fill gives a fully masked row uniform weights)."""
        fills = [a for n in walk(scores) if isinstance(n, Op) and n.prim == "select_n" for a in n.args[1:]
                 if _is_neg(a)]
        if fills and all(math.isinf(float(_strip(f).value)) for f in fills):
            return True
        if not complete:
            return False
        sq, sk = (math.prod(self.ext(x) for x in ax) for ax in (q_axis, k_axis))
        for q in (0, sq - 1):
            lo, hi = 0, sk - 1
            for c in clauses:
                if c.b == 0:
                    if c.a * q + c.c < 0:
                        return False
                elif c.b > 0:
                    lo = max(lo, -((c.a * q + c.c) // c.b))
                else:
                    hi = min(hi, (c.a * q + c.c) // -c.b)
            if lo > hi:
                return False
        return True


def _clause_text(c: Clause) -> str:
    terms = [f"{'' if abs(x) == 1 else abs(x)}{n}" if x else "" for x, n in ((c.a, "q"), (c.b, "k"))]
    lhs = " + ".join(t if x > 0 else f"-{t}" for t, x in zip(terms, (c.a, c.b)) if x) or "0"
    return f"{lhs} >= {-c.c}".replace("+ -", "- ")


# ---------------------------------------------------------------- code for the kernel body


class Emitter:
    """Python lines for the kernel body, with every number recorded as a placeholder ``{cN}``."""

    def __init__(self, rec: Recognizer, q_axis, k_axis, grid_axes, bias_names):
        self.rec, self.q_axis, self.k_axis, self.grid_axes = rec, q_axis, k_axis, grid_axes
        self.bias_names = bias_names
        self.constants: list[float] = []
        self.droppable: set[int] = set()
        self.counter = 0
        self.n_ops = 0

    def num(self, value) -> str:
        self.constants.append(value)
        return "{c%d}" % (len(self.constants) - 1)

    def lit(self, node: Lit) -> str:
        text = literal(node.value)
        if "float('" in text or text in ("True", "False"):
            return text
        return self.num(node.value)

    # coordinates

    def _axis_of(self, leaf: int):
        for name, ax in (("qpos", self.q_axis), ("kpos", self.k_axis)):
            if leaf in ax:
                return name, ax
        for g, (_, ax) in enumerate(self.grid_axes):
            if leaf in ax:
                return f"g{g}", ax
        raise Declined("a mask or bias depends on the head dim")

    def affine(self, node: Node):
        """{axis name: coefficient}, constant; or None when ``node`` is not affine in whole axes."""
        leaves: dict[int, int] = {}
        const = 0
        stack = [(node, 1)]
        while stack:
            n, coef = stack.pop()
            if isinstance(n, Lit) and "int" in n.dtype:
                const += coef * int(n.value)
            elif isinstance(n, Coord):
                lv = self.rec.L(n.var)
                stride = 1
                for leaf in reversed(lv):
                    leaves[leaf] = leaves.get(leaf, 0) + coef * stride
                    stride *= self.rec.ext(leaf)
            elif isinstance(n, Op) and n.prim in ("add", "sub"):
                stack += [(n.args[0], coef), (n.args[1], coef if n.prim == "add" else -coef)]
            elif isinstance(n, Op) and n.prim == "neg":
                stack.append((n.args[0], -coef))
            elif isinstance(n, Op) and n.prim == "convert_element_type" and "int" in n.dtype and "int" in n.args[0].dtype:
                stack.append((n.args[0], coef))
            elif isinstance(n, Op) and n.prim == "mul" and any(isinstance(a, Lit) and "int" in a.dtype for a in n.args):
                lit = next(a for a in n.args if isinstance(a, Lit))
                other = n.args[1] if lit is n.args[0] else n.args[0]
                stack.append((other, coef * int(lit.value)))
            else:
                return None
        axes: dict[str, int] = {}
        for leaf, c in leaves.items():
            if c == 0:
                continue
            name, ax = self._axis_of(leaf)
            if name in axes:
                continue
            strides, s = {}, 1
            for x in reversed(ax):
                strides[x] = s
                s *= self.rec.ext(x)
            unit = c // strides[leaf]
            if c % strides[leaf] or any(leaves.get(x, 0) != unit * strides[x] for x in ax):
                return None
            axes[name] = unit
        return axes, const

    def coord(self, var) -> str:
        lv = self.rec.L(var)
        name, ax = self._axis_of(lv[0])
        for start in range(len(ax) - len(lv) + 1):
            if ax[start:start + len(lv)] == lv:
                inner = math.prod(self.rec.ext(x) for x in ax[start + len(lv):])
                span = math.prod(self.rec.ext(x) for x in lv)
                expr = f"jax.lax.div({name}, {self.num(inner)})" if inner > 1 else name  # positions are >= 0
                return expr if start == 0 else f"jax.lax.rem({expr}, {self.num(span)})"
        raise Declined("a mask mixes parts of two axes")

    def _affine_text(self, form) -> str:
        axes, const = form
        parts = []
        for name, c in axes.items():
            parts.append(name if c == 1 else f"-{name}" if c == -1 else f"{self.num(c)} * {name}")
        if const or not parts:
            parts.append(self.num(const))
        return parts[0] if len(parts) == 1 else "(" + " + ".join(parts) + ")"

    # expressions

    def expr(self, n: Node, names: dict[int, str], lines: list[str]) -> str:
        """The Python text of ``n``, appending a line per op not yet named (integer affine forms inline)."""
        if id(n) in names:
            return names[id(n)]
        if isinstance(n, Lit):
            return self.lit(n)
        if isinstance(n, Coord):
            names[id(n)] = self.coord(n.var)
            return names[id(n)]
        if isinstance(n, (In, Dot, Reduce, Pos)):
            raise Declined("an unexpected value inside the score pipeline")
        if "int" in n.dtype:
            form = self.affine(n)
            if form is not None:
                names[id(n)] = self._affine_text(form)
                return names[id(n)]
        if True:
            args = [self.expr(a, names, lines) for a in n.args]
            p = n.prim
            is_int = "int" in n.dtype
            if p == "div" and is_int:  # the jaxpr's integer div and rem truncate, as lax.div and lax.rem do
                text = f"jax.lax.div({args[0]}, {args[1]})"
            elif p == "rem" and is_int:
                text = f"jax.lax.rem({args[0]}, {args[1]})"
            elif p in BINARY:
                text = BINARY[p].format(*args)
            elif p in UNARY:
                text = UNARY[p].format(*args)
            elif p == "integer_pow":
                text = f"{args[0]} ** {int(n.params['y'])}"
            elif p == "convert_element_type":
                base = f"jnp.asarray({args[0]})" if isinstance(n.args[0], Lit) else args[0]
                text = f"{base}.astype({_jnp_dtype(n.dtype)})"
            elif p == "select_n" and len(args) == 3 and id(n) in self.droppable:
                kept = f"jnp.asarray({args[2]}, {_jnp_dtype(n.dtype)})" if isinstance(n.args[2], Lit) else args[2]
                text = f"jnp.where({args[0]}, {args[2]}, {args[1]}) if masked else {kept}"
            elif p == "select_n" and len(args) == 3:
                text = f"jnp.where({args[0]}, {args[2]}, {args[1]})"
            elif p == "clamp":
                text = f"jnp.clip({args[1]}, {args[0]}, {args[2]})"
            else:
                raise Declined(f"no emitter for {p} in the score pipeline")
            self.counter += 1
            self.n_ops += 1
            name = f"t{self.counter}"
            lines.append(f"{name} = {text}")
            names[id(n)] = name
        return names[id(n)]

    def prologue(self, node: Node, leaf: In, what: str) -> tuple[list[str], str]:
        names = {id(leaf): f"{what}_ref[...]"}
        lines: list[str] = []
        return lines, self.expr(node, names, lines)

    def mask(self, scores: Node) -> tuple[list[Clause], set[int]]:
        """The affine clauses under which the scores are not masked, and the select nodes that apply only them."""
        clauses: list[Clause] = []
        droppable: set[int] = set()

        def conjuncts(p: Node) -> tuple[list[Clause], bool]:
            """Affine clauses the predicate implies, and whether they are all of it."""
            if isinstance(p, Op) and p.prim == "and":
                (a, full_a), (b, full_b) = conjuncts(p.args[0]), conjuncts(p.args[1])
                return a + b, full_a and full_b
            found = pred_clauses(p)
            return (found, True) if found is not None else ([], False)

        def pred_clauses(p: Node) -> list[Clause] | None:
            neg = False
            if isinstance(p, Op) and p.prim == "not":
                neg, p = True, p.args[0]
            if not (isinstance(p, Op) and p.prim in ("ge", "gt", "le", "lt")):
                return None
            forms = [self.affine(a) if "int" in a.dtype else None for a in p.args]
            if None in forms or any(set(f[0]) - {"qpos", "kpos"} for f in forms):
                return None
            (l, lc), (r, rc) = forms
            a = l.get("qpos", 0) - r.get("qpos", 0)
            b = l.get("kpos", 0) - r.get("kpos", 0)
            c = lc - rc
            op = {"ge": "lt", "gt": "le", "le": "gt", "lt": "ge"}[p.prim] if neg else p.prim
            if op == "ge":
                return [Clause(a, b, c)]
            if op == "gt":
                return [Clause(a, b, c - 1)]
            if op == "le":
                return [Clause(-a, -b, -c)]
            return [Clause(-a, -b, -c - 1)]

        def visit(n: Node):
            n = _strip(n)
            if isinstance(n, Op) and n.prim == "select_n" and len(n.args) == 3:
                pred, on_false, on_true = n.args
                if _is_neg(on_false):
                    found, complete = conjuncts(pred)
                    clauses.extend(found)
                    if found and complete:
                        droppable.add(id(n))
                    visit(on_true)
                elif _is_neg(on_true) and isinstance(pred, Op) and pred.prim == "not":
                    visit(on_false)
            elif isinstance(n, Op) and n.prim == "add":
                visit(n.args[0])
                visit(n.args[1])
            elif isinstance(n, Op) and n.prim == "mul" and any(isinstance(_strip(a), Lit) and
                                                               float(_strip(a).value) > 0 for a in n.args):
                visit(next(a for a in n.args if not isinstance(_strip(a), Lit)))

        visit(scores)
        return clauses, droppable

    def scores(self, scores: Node, dot1: Dot, droppable: set[int]) -> list[str]:
        names = {id(dot1): "s"}
        for n in walk(scores, names):
            if isinstance(n, In):
                names[id(n)] = self.bias_names[id(n)]
        lines: list[str] = []
        self.droppable = droppable
        result = self.expr(scores, names, lines)
        self.droppable = set()
        return lines + [f"return {result}"]

    def conditions(self, clauses: list[Clause]) -> dict[str, Any]:
        """Block-level forms of the clauses: the max (min) of ``a q + b k + c`` over a block is at a corner."""
        if not clauses:
            return {}

        def affine(terms: list[tuple[int, str]], const: int) -> str:
            text = ""
            for coef, var in terms:
                if coef:
                    sign = "-" if coef < 0 else "+" if text else ""
                    text += f" {sign} " if text else sign
                    text += var if abs(coef) == 1 else f"{abs(coef)} * {var}"
            if const or not text:
                text += (f" - {self.num(-const)}" if const < 0 else f" + {self.num(const)}") if text else \
                    self.num(const)
            return text.strip()

        def bound(c: Clause, best: bool) -> str:
            q = ("q_hi" if c.a > 0 else "q_lo") if best else ("q_lo" if c.a > 0 else "q_hi")
            k = ("k_hi" if c.b > 0 else "k_lo") if best else ("k_lo" if c.b > 0 else "k_hi")
            return f"({affine([(c.a, q), (c.b, k)], c.c)} >= 0)"

        out: dict[str, Any] = {"visible": " & ".join(bound(c, True) for c in clauses),
                               "full": " & ".join(bound(c, False) for c in clauses)}
        # k <= a q + c (b = -1): the last visible key of a query block; k >= -(a q + c) (b = 1): the first
        last = [affine([(c.a, "q_hi" if c.a > 0 else "q_lo")], c.c) for c in clauses if c.b == -1]
        first = [affine([(-c.a, "q_hi" if c.a > 0 else "q_lo")], -c.c) for c in clauses if c.b == 1]
        if last:
            out["k_last"] = functools.reduce(lambda x, y: f"jnp.minimum({x}, {y})", last)
        if first:
            out["k_first"] = functools.reduce(lambda x, y: f"jnp.maximum({x}, {y})", first)
        return out

    def epilogue(self, ops: list[Op]) -> list[str]:
        lines = []
        for n in ops:
            lit_or = [self.lit(a) if isinstance(a, Lit) else "o" for a in n.args]
            if n.prim == "convert_element_type":
                text = f"o.astype({_jnp_dtype(n.dtype)})"
            elif n.prim in BINARY:
                text = BINARY[n.prim].format(*lit_or)
            elif n.prim in UNARY:
                text = UNARY[n.prim].format(*lit_or)
            else:
                raise Declined(f"no emitter for {n.prim} after the attention")
            lines.append(f"o = {text}")
        return lines


# ---------------------------------------------------------------- entry points


def analyse_attention(program: Program) -> AttentionSpec:
    """The attention spec of ``program``, or :class:`Declined` with the reason."""
    if len(program.outputs) != 1 or not isinstance(program.outputs[0], str):
        raise Declined(f"the reference returns {len(program.outputs)} outputs; the templates write one")
    interp = Interpreter()
    args = []
    for i, name in enumerate(program.inputs):
        shape = program.shapes[name]
        vars_ = tuple(interp._fresh(e) for e in shape)
        args.append(Val(In(i, vars_, program.dtypes[name]), shape, vars_))
    try:
        (out,) = interp.run(program, args)
        if out.static:
            raise Declined("the output depends on no input")
        return Recognizer(interp, program, out, args).match()
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, StopIteration) as exc:
        # a form of jaxpr the interpreter does not know: a decline that names it, not a crash of the plan
        raise Declined(f"the attention analysis could not read this reference ({type(exc).__name__}: {exc})") from exc


def bind_sizes(full: AttentionSpec, small: AttentionSpec) -> list[str]:
    """The numbers of the generated lines as Python text: literal where both sizes agree, else an expression
    of the kernel's sizes (``sq``, ``sk``, ``hd``, ``ev``)."""
    lines = lambda s: (s.q_lines, s.k_lines, s.v_lines, s.score_lines, s.out_lines, s.visible, s.full,  # noqa: E731
                       s.k_first, s.k_last)
    if lines(full) != lines(small) or len(full.constants) != len(small.constants):
        raise Declined("the reference's score pipeline changes with the input size (it is not shape-generic)")
    dims_full = {"sq": full.sq, "sk": full.sk, "hd": full.d, "ev": full.e}
    dims_small = {"sq": small.sq, "sk": small.sk, "hd": small.d, "ev": small.e}
    options = []
    for n in dims_full:
        options += [(f"{n}", lambda d, n=n: d[n]), (f"(1.0 / {n})", lambda d, n=n: 1.0 / d[n]),
                    (f"(1.0 / math.sqrt({n}))", lambda d, n=n: 1.0 / math.sqrt(d[n])),
                    (f"math.sqrt({n})", lambda d, n=n: math.sqrt(d[n]))]
        for m in dims_full:
            if m != n:
                options.append((f"({n} - {m})", lambda d, n=n, m=m: d[n] - d[m]))
    texts = []
    for a, b in zip(full.constants, small.constants):
        if a == b or (isinstance(a, float) and math.isclose(a, b, rel_tol=1e-6)):
            texts.append(literal(a))
            continue
        for text, fn in options:
            if math.isclose(fn(dims_full), float(a), rel_tol=1e-6) and math.isclose(fn(dims_small), float(b),
                                                                                      rel_tol=1e-6):
                texts.append(text if isinstance(a, float) or "/" not in text and "sqrt" not in text
                             else f"int({text})")
                break
        else:
            raise Declined(f"a constant of the score pipeline changes with the input size ({a} at full size, {b} at "
                           "small size) in a way the synthesizer cannot express")
    return texts


def literal_texts(spec: AttentionSpec) -> list[str]:
    return [literal(c) for c in spec.constants]
