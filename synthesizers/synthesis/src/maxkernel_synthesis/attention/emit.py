"""Code for the kernel body: the Emitter writes the prologue, score, mask and epilogue lines."""

from __future__ import annotations

import functools
import math
from typing import Any

from ..emit import BINARY, UNARY, elementwise_text, literal
from ..ir import Declined
from .spec import Clause, Leaves, _is_neg, _strip
from .symbols import Coord, Dot, In, Lit, Node, Op, Pos, Reduce, _jnp_dtype, walk



class Emitter:
    """Python lines for the kernel body, with every number recorded as a placeholder ``{cN}``."""

    def __init__(self, rec: Leaves, q_axis, k_axis, grid_axes, bias_names):
        self.rec, self.q_axis, self.k_axis, self.grid_axes = rec, q_axis, k_axis, grid_axes
        self.bias_names = bias_names
        self.constants: list[float] = []
        self.droppable: set[int] = set()
        self.counter = 0
        self.n_ops = 0

    def num(self, value) -> str:
        self.constants.append(value)
        return f"{{c{len(self.constants) - 1}}}"

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
        terms = self._leaf_terms(node)
        if terms is None:
            return None
        leaves, const = terms
        axes: dict[str, int] = {}
        for leaf, c in leaves.items():
            if c == 0:
                continue
            name, ax = self._axis_of(leaf)
            if name in axes:
                continue
            unit = self._whole_axis_coefficient(leaves, leaf, c, ax)
            if unit is None:
                return None
            axes[name] = unit
        return axes, const

    def _leaf_terms(self, node: Node) -> tuple[dict[int, int], int] | None:
        """({leaf variable: coefficient}, constant) of an integer affine expression, or None."""
        leaves: dict[int, int] = {}
        const = 0
        stack = [(node, 1)]
        while stack:
            n, coef = stack.pop()
            if isinstance(n, Lit) and "int" in n.dtype:
                const += coef * int(n.value)
            elif isinstance(n, Coord):
                stride = 1
                for leaf in reversed(self.rec.L(n.var)):
                    leaves[leaf] = leaves.get(leaf, 0) + coef * stride
                    stride *= self.rec.ext(leaf)
            elif isinstance(n, Op) and _affine_step(n) is not None:
                stack += [(arg, coef * factor) for arg, factor in _affine_step(n)]
            else:
                return None
        return leaves, const

    def _whole_axis_coefficient(self, leaves: dict[int, int], leaf: int, c: int, ax: tuple) -> int | None:
        """The coefficient of axis ``ax`` when its leaves appear with its own strides, else None."""
        strides, s = {}, 1
        for x in reversed(ax):
            strides[x] = s
            s *= self.rec.ext(x)
        unit = c // strides[leaf]
        if c % strides[leaf] or any(leaves.get(x, 0) != unit * strides[x] for x in ax):
            return None
        return unit

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
            elif elementwise_text(p, args, n.params) is not None:
                text = elementwise_text(p, args, n.params)
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
            (left, lc), (right, rc) = forms
            a = left.get("qpos", 0) - right.get("qpos", 0)
            b = left.get("kpos", 0) - right.get("kpos", 0)
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


def _affine_step(n: Op) -> list[tuple[Node, int]] | None:
    """The arguments of an integer op that keeps an expression affine, each with its factor; None otherwise."""
    if n.prim in ("add", "sub"):
        return [(n.args[0], 1), (n.args[1], 1 if n.prim == "add" else -1)]
    if n.prim == "neg":
        return [(n.args[0], -1)]
    if n.prim == "convert_element_type" and "int" in n.dtype and "int" in n.args[0].dtype:
        return [(n.args[0], 1)]
    if n.prim == "mul" and any(isinstance(a, Lit) and "int" in a.dtype for a in n.args):
        lit = next(a for a in n.args if isinstance(a, Lit))
        other = n.args[1] if lit is n.args[0] else n.args[0]
        return [(other, int(lit.value))]
    return None
