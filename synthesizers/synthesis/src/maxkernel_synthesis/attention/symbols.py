"""Symbolic values: the expression nodes the interpreter builds, and helpers to walk, rewrite and fold them."""

from __future__ import annotations

import math

import numpy as np
from attrs import define

FOLD = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
        "neg": np.negative, "exp": np.exp, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
        "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
        "ge": np.greater_equal, "and": np.logical_and, "or": np.logical_or, "not": np.logical_not,
        "select_n": lambda p, *cases: cases[int(p)]}


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
            memo[id(n)] = n if all(a is b for a, b in zip(args, n.args, strict=False)) else _op(n.prim, args, n.params, n.dtype)
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
    simpler = _simplified(prim, args, dtype)
    if simpler is not None:
        return simpler
    if all(isinstance(a, Lit) for a in args):
        try:
            folded = _folded(prim, args, dtype)
        except (TypeError, ValueError):
            folded = None
        if folded is not None:
            return folded
    return Op(prim, args, params, dtype)


def _simplified(prim: str, args, dtype: str) -> Node | None:
    """``where(p, False, True)`` is ``p``, ``where(p, True, False)`` is ``not p``; ``True & x`` is ``x`` ..."""
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
    return None


def _folded(prim: str, args, dtype: str) -> Lit | None:
    """The literal an op of literals computes, or None when it is not one this folds."""
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
    return None
