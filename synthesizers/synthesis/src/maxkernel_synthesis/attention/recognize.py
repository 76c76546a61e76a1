"""Recognition: match q·kᵀ → softmax over the keys → ·v in the interpreted output, and the attention spec."""

from __future__ import annotations

import math

from ..ir import Declined, Program
from .emit import Emitter
from .interpreter import Interpreter
from .layout import find_axes, operands
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
        dot2, epilogue, norm_after = self._output_matmul()
        p_side, v_side, scores, keys = self._softmax(dot2, norm_after)
        dot1, contract1, q_node, k_node = self._first_matmul(scores, keys)
        q_in, k_in, v_in = (self._single_input(n, what) for n, what in ((q_node, "q"), (k_node, "k"), (v_side, "v")))
        k_free = self.deps(k_node) - contract1 - self.deps(q_node)
        if k_free != keys:
            raise Declined(f"the first matmul's key-side free axes ({self._describe(k_free)}) are not the axes the "
                           f"softmax normalises over ({self._describe(keys)})")
        return self._layout(q_in, k_in, v_in, q_node, k_node, v_side, dot1, dot2, scores, keys, contract1,
                            epilogue, p_side)

    def _output_matmul(self) -> tuple[Dot, list, Node | None]:
        """(the second matmul, the elementwise epilogue after it, a normaliser divided after it or None)."""
        node, epilogue = self.out.node, []
        while isinstance(node, Op) and node.prim != "select_n" and \
                len([a for a in node.args if not isinstance(a, Lit)]) == 1:
            epilogue.append(node)
            node = next(a for a in node.args if not isinstance(a, Lit))
        norm_after = None
        if isinstance(node, Op) and node.prim == "div" and isinstance(_strip(node.args[0]), Dot):
            norm_after, node = node.args[1], _strip(node.args[0])
        if not isinstance(node, Dot):
            raise Declined("the output is not a matmul of softmax weights with v")
        return node, epilogue, norm_after

    def _softmax(self, dot2: Dot, norm_after) -> tuple[Node, Node, Node, frozenset]:
        """(the weights side, the v side, the scores, the key variables) of a softmax over the keys feeding ``dot2``."""
        sides = ((dot2.lhs, dot2.rhs), (dot2.rhs, dot2.lhs))
        found = next(((p, v, w) for p, v in sides if (w := self._weights(p, norm_after)) is not None), None)
        if found is None:
            raise Declined("no softmax (exp(s - max) / sum exp) feeds the second matmul")
        p_side, v_side, (_, keys_reduce, scores) = found
        keys = frozenset(x for v in keys_reduce for x in self.L(v))
        contracted = frozenset(x for v in dot2.contract for x in self.L(v))
        if keys != contracted:
            raise Declined(f"the softmax normalises over {self._describe(keys)}, but the second matmul contracts "
                           f"over {self._describe(contracted)}: a softmax over an axis that is not the key axis")
        return p_side, v_side, scores, keys

    def _first_matmul(self, scores: Node, keys: frozenset) -> tuple[Dot, frozenset, Node, Node]:
        """(q·kᵀ, its contracted variables, the q side, the k side) of scores that are one matmul then elementwise."""
        dots = [n for n in walk(scores) if isinstance(n, Dot)]
        if len(dots) != 1 or any(isinstance(n, Reduce) for n in walk(scores)):
            raise Declined("the scores are not one q·kᵀ matmul followed by elementwise ops")
        dot1 = dots[0]
        contract1 = frozenset(x for v in dot1.contract for x in self.L(v))
        sides = [self.deps(side) - contract1 for side in (dot1.lhs, dot1.rhs)]
        if sides[1] & keys and not sides[0] & keys:
            return dot1, contract1, dot1.lhs, dot1.rhs
        if sides[0] & keys and not sides[1] & keys:
            return dot1, contract1, dot1.rhs, dot1.lhs
        raise Declined("the first matmul's free axes do not separate queries from keys")

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

    # -- layout (layout.py) and the spec

    def _layout(self, q_in, k_in, v_in, q_node, k_node, v_node, dot1, dot2, scores, keys, contract1, epilogue,
                p_side) -> AttentionSpec:
        axes = find_axes(self, q_in, k_in, v_in, scores, dot1, keys, contract1)
        bias_ins = [n for n in walk(scores, {id(dot1)}) if isinstance(n, In)]
        ops, seen_bias = operands(self, axes, q_in, k_in, v_in, bias_ins)
        emitter = Emitter(self, axes.q_axis, axes.keys, axes.grid, {id(b): f"b{i}" for i, b in enumerate(seen_bias)})
        q_lines, qn = emitter.prologue(q_node, q_in, "q")
        k_lines, kn = emitter.prologue(k_node, k_in, "k")
        v_lines, vn = emitter.prologue(v_node, v_in, "v")
        clauses, droppable = emitter.mask(scores)
        score_lines = emitter.scores(scores, dot1, droppable)
        out_lines = emitter.epilogue(list(reversed(epilogue)))
        skip = bool(clauses) and self._skippable(scores, clauses, axes.q_axis, axes.keys, complete=len(droppable) > 0)
        size = self._size
        return AttentionSpec(
            operands=ops, grid=[(i, size(ax)) for i, ax in axes.grid], sq=size(axes.q_axis), sk=size(axes.keys),
            d=size(axes.d_axis), e=size(axes.e_axis),
            q_lines=q_lines + [f"q = {qn}"], k_lines=k_lines + [f"k = {kn}"], v_lines=v_lines + [f"v = {vn}"],
            score_lines=score_lines, out_lines=out_lines, dot1_dtype=dot1.dtype, p_dtype=p_side.dtype,
            dot2_dtype=dot2.dtype, out_dtype=self.out.node.dtype, clauses=clauses, skip=skip,
            constants=emitter.constants, features=_features(ops, clauses, skip), n_score_ops=emitter.n_ops,
            **emitter.conditions(clauses))

    def _size(self, axis: tuple) -> int:
        return math.prod(self.ext(x) for x in axis)

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


def _features(ops: list[Operand], clauses: list[Clause], skip: bool) -> list[str]:
    """What the kernel fuses besides plain attention, for its docstring."""
    features = []
    if any(r[0] == "grid" and r[2] != "full" for o in ops if o.role in ("k", "v") for r in o.roles):
        features.append("grouped-query attention (each kv head serves several q heads; the index map picks it)")
    if clauses:
        features.append("mask " + " and ".join(_clause_text(c) for c in clauses) +
                        (", fully masked blocks skipped" if skip else ""))
    features.extend(f"bias input {b.input} of shape {list(b.shape)} read per (q, k) tile" for b in ops
                    if b.role == "bias")
    return features


def _clause_text(c: Clause) -> str:
    terms = [f"{'' if abs(x) == 1 else abs(x)}{n}" if x else "" for x, n in ((c.a, "q"), (c.b, "k"))]
    lhs = " + ".join(t if x > 0 else f"-{t}" for t, x in zip(terms, (c.a, c.b), strict=False) if x) or "0"
    return f"{lhs} >= {-c.c}".replace("+ -", "- ")
