"""A kernel's scalar control, evaluated at every grid step at once: which ``pl.when`` arms run, where blocks go.

A ``pl.when`` around a kernel's init, its epilogue or its causal skip is a
``cond`` whose predicate is scalar arithmetic on ``pl.program_id`` (and on
scalar-prefetched tables, as splash attention's block masks or megablox's tile
maps). Here that arithmetic runs in numpy over a vector holding every grid step
(row-major, last axis fastest), so the cost model can charge each arm by the
share of steps that take it. Scalar-prefetch tables are known when the program
holds them as constants (``known.py`` finds them); a predicate that reads
anything else (a value loaded from a block, a loop's counter) is *unknown*, and
the caller charges the dearest arm at every step: an upper bound, never a guess
in the kernel's favour.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from jax.extend import core as jex_core

#: Past this many grid steps the control is evaluated on an evenly strided sample (shares stay unbiased).
MAX_STEPS = 1 << 22


def grid_points(grid: tuple[int, ...]) -> tuple[list[np.ndarray], int]:
    """(per-axis program ids of every step, row-major; the stride when the grid was sampled)."""
    steps = math.prod(grid) if grid else 1
    stride = max(1, math.ceil(steps / MAX_STEPS))
    flat = np.arange(0, steps, stride, dtype=np.int64)
    return [a.astype(np.int32) for a in np.unravel_index(flat, grid)] if grid else [], stride


def _int_div(a, b):
    """lax.div on integers rounds toward zero (numpy's // floors)."""
    if np.issubdtype(np.asarray(a).dtype, np.integer):
        q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
        return np.where(np.sign(a) * np.sign(b) < 0, -q, q)
    return np.asarray(a) / b


_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
    "div": _int_div, "rem": np.fmod, "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "shift_left": np.left_shift, "shift_right_arithmetic": np.right_shift,
}
_LOGICAL = {"and": (np.logical_and, np.bitwise_and), "or": (np.logical_or, np.bitwise_or),
            "xor": (np.logical_xor, np.bitwise_xor)}
_UNARY = {"neg": np.negative, "abs": np.abs, "sign": np.sign}


class Scalars:
    """Values of a kernel's scalar variables at every (sampled) grid step; None where unknown."""

    def __init__(self, grid: tuple[int, ...], tables: dict[Any, np.ndarray] | None = None,
                 vmapped: tuple[int, ...] = ()) -> None:
        self.grid = tuple(int(g) for g in grid)
        self.points, self.stride = grid_points(self.grid)
        self.env: dict[Any, Any] = dict(tables or {})  # var -> value (a table for a scalar-prefetch ref)
        # A kernel under jax.vmap runs on a grid with the batch axes added; its pl.program_id(k) names the k-th
        # axis that is not one of them.
        self.axes = [i for i in range(len(self.grid)) if i not in set(vmapped)]

    @property
    def size(self) -> int:
        return len(self.points[0]) if self.points else 1

    def value(self, atom) -> Any:
        if isinstance(atom, jex_core.Literal):
            return np.asarray(atom.val)
        return self.env.get(atom)

    def bind(self, inner_vars, outer_atoms) -> Scalars:
        """A view for a sub-jaxpr (a cond arm, a nested jit): its invars take the outer values."""
        child = Scalars.__new__(Scalars)
        child.grid, child.points, child.stride, child.axes = self.grid, self.points, self.stride, self.axes
        child.env = {}
        for inner, outer in zip(inner_vars, outer_atoms, strict=False):
            known = self.value(outer)
            if known is not None:
                child.env[inner] = known
        return child

    def step(self, eqn) -> None:
        """Evaluate one equation if it is scalar control whose inputs are known; else leave its outputs unknown."""
        try:
            out = self._eval(eqn)
        except (ValueError, TypeError, IndexError, KeyError, OverflowError, ZeroDivisionError):
            out = None
        if out is not None and len(eqn.outvars) == 1:
            self.env[eqn.outvars[0]] = out

    def _eval(self, eqn) -> Any:
        name = eqn.primitive.name
        if name == "program_id":
            return self.points[self.axes[int(eqn.params["axis"])]] if self.points else np.zeros(1, np.int32)
        if name == "num_programs":
            return np.asarray(self.grid[self.axes[int(eqn.params["axis"])]], np.int32)
        if any(getattr(v.aval, "shape", ()) != () for v in eqn.outvars):
            return None  # vector work, not control
        args = [self.value(v) for v in eqn.invars]
        if name == "get":
            return self._get(eqn, args)
        if any(a is None for a in args):
            return None
        if name in _BINARY:
            return _BINARY[name](args[0], args[1])
        if name in _LOGICAL:
            logical, bitwise = _LOGICAL[name]
            return (logical if args[0].dtype == bool else bitwise)(args[0], args[1])
        if name == "not":
            return np.logical_not(args[0]) if args[0].dtype == bool else np.invert(args[0])
        if name in _UNARY:
            return _UNARY[name](args[0])
        if name == "convert_element_type":
            return np.asarray(args[0]).astype(np.dtype(eqn.params["new_dtype"]))
        if name == "select_n":
            return np.choose(np.asarray(args[0]).astype(np.int32), args[1:])
        if name == "clamp":
            return np.clip(args[1], args[0], args[2])
        return None

    def _get(self, eqn, args) -> Any:
        """A scalar read from a known table (a scalar-prefetch ref) at known indices."""
        table = args[0]
        if table is None or np.ndim(table) == 0:
            return None
        from jax import tree_util

        indexers = tree_util.tree_unflatten(eqn.params["tree"], eqn.invars[1:])
        index = []
        for indexer in indexers:
            for i in getattr(indexer, "indices", ()):
                value = self.value(i) if isinstance(i, (jex_core.Var, jex_core.Literal)) else (
                    np.asarray(i) if isinstance(i, (int, np.integer)) else None)
                if value is None:
                    return None
                index.append(np.asarray(value, np.int64))
        if len(index) != np.ndim(table):
            return None
        return np.asarray(table)[tuple(np.clip(ix, 0, n - 1) for ix, n in zip(index, np.shape(table), strict=True))]
