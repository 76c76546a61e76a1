"""Recognition: match q·kᵀ → softmax over the keys → ·v in the interpreted output, and the attention spec."""

from __future__ import annotations

import math

from ..ir import Declined, Program
from .emit import Emitter
from .interpreter import Interpreter
from .spec import AttentionSpec, Clause, Operand, _is_neg, _strip
from .symbols import Coord, Dot, In, Lit, Node, Op, Pos, Reduce, Val, walk

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
        sides = ((dot2.lhs, dot2.rhs), (dot2.rhs, dot2.lhs))
        found = next(((p, v, w) for p, v in sides if (w := self._weights(p, norm_after)) is not None), None)
        if found is None:
            raise Declined("no softmax (exp(s - max) / sum exp) feeds the second matmul")
        p_side, v_side, weights = found
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
        self.deps(self.out.node)
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
    lhs = " + ".join(t if x > 0 else f"-{t}" for t, x in zip(terms, (c.a, c.b), strict=False) if x) or "0"
    return f"{lhs} >= {-c.c}".replace("+ -", "- ")
