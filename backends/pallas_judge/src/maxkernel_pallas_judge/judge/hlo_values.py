"""Static integers in StableHLO: constants, folded arithmetic, and the trip counts of while loops.

A ``fori_loop``/``scan`` (and Pallas interpret mode's loop over the grid) lowers
to ``stablehlo.while`` whose condition compares an induction variable, stepped
by a constant, with a bound that is a constant or loop-invariant. Anything
else is data-dependent: ``while_trip_count`` returns None and the caller
charges a worst case.

Integers are folded in their own width, as the chip computes them: a constant or
a folded value outside its type's range (an int16 product read as 65536 where
the chip holds 0), a counter that could wrap before it meets its bound (an int8
counter stepped past 127, a ``!=`` it may step over), or a span of no trips at
all is not a count the judge can trust, and is charged as data-dependent.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
from jax._src.lib.mlir import ir

#: A loop (or a kernel's grid axis) whose trip count is not static is charged as if it ran this many times.
#: One figure for every such count, so the CPU interpret program's grid loop and the Mosaic kernel's grid
#: axis it mirrors agree (a data-dependent grid, as megablox's, is both).
UNBOUNDED_TRIPS = 1 << 12

#: Folded through these when looking for a constant.
_FOLD = {
    "stablehlo.add": lambda a, b: a + b, "stablehlo.subtract": lambda a, b: a - b,
    "stablehlo.multiply": lambda a, b: a * b, "stablehlo.maximum": max, "stablehlo.minimum": min,
    "arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b, "arith.muli": lambda a, b: a * b,
}
_PASS = ("stablehlo.convert", "stablehlo.reshape", "stablehlo.broadcast_in_dim", "arith.index_cast",
         "arith.extsi", "arith.extui", "arith.trunci")


def _dense_int(attr: ir.Attribute) -> int | None:
    try:
        dense = ir.DenseIntElementsAttr(attr)
    except (ValueError, TypeError):
        try:
            return int(ir.IntegerAttr(attr).value)
        except (ValueError, TypeError):
            return None
    values = np.asarray(dense)
    if values.size == 0 or not np.all(values == values.flat[0]):
        return None
    return int(values.flat[0])


def _op(value: ir.Value) -> ir.Operation:
    owner = value.owner
    return getattr(owner, "operation", owner)


def _in_loop(arg: ir.BlockArgument, while_op: ir.Operation) -> bool:
    """Is ``arg`` an argument of one of ``while_op``'s regions (condition or body)?"""
    parent = arg.owner.owner
    return getattr(parent, "operation", parent) == while_op


def _block_arg(value: ir.Value) -> ir.BlockArgument | None:
    try:
        return ir.BlockArgument(value)
    except (ValueError, TypeError):
        return None


def int_range(value: ir.Value) -> tuple[int, int] | None:
    """(lowest, highest) an integer value of this type holds; None for a type that is not an integer's."""
    t = value.type
    with contextlib.suppress(ValueError, TypeError):  # a tensor's elements, or the scalar type itself
        t = ir.ShapedType(t).element_type
    if t.typeid == ir.IndexType.static_typeid:
        return -(1 << 63), (1 << 63) - 1
    if t.typeid != ir.IntegerType.static_typeid:
        return None
    integer = ir.IntegerType(t)
    width = integer.width
    if integer.is_unsigned:
        return 0, (1 << width) - 1
    if width == 1:
        return 0, 1
    return -(1 << (width - 1)), (1 << (width - 1)) - 1


def _fits(number: int | None, value: ir.Value) -> int | None:
    bounds = int_range(value)
    return number if number is not None and (bounds is None or bounds[0] <= number <= bounds[1]) else None


def constant_int(value: ir.Value, depth: int = 0, loop: tuple | None = None) -> int | None:
    """The value as an integer when it is one at compile time (``loop``: invariant loop arguments); None when
    it is not static, or does not fit its type (folding never wraps silently)."""
    return _fits(_constant_int(value, depth, loop), value)


def _constant_int(value: ir.Value, depth: int, loop: tuple | None) -> int | None:
    if depth > 32:
        return None
    arg = _block_arg(value)
    if arg is not None:
        if loop is not None and _in_loop(arg, loop[2]) and arg.arg_number in loop[1]:
            return constant_int(loop[2].operands[arg.arg_number], depth + 1)
        return None
    op = _op(value)
    name = op.name.removeprefix("stable_mosaic.")  # a Mosaic kernel's serialized ops carry its dialect's prefix
    if name in ("stablehlo.constant", "arith.constant"):
        return _dense_int(op.attributes["value"])
    if name in _PASS:
        return constant_int(op.operands[0], depth + 1, loop)
    if name in _FOLD:
        a, b = (constant_int(v, depth + 1, loop) for v in op.operands[:2])
        return None if a is None or b is None else _FOLD[name](a, b)
    return None


def _invariant_args(while_op: ir.Operation) -> set[int]:
    body = while_op.regions[1].blocks[0]
    ret = list(body.operations)[-1]
    return {i for i, v in enumerate(ret.operands) if (a := _block_arg(v)) is not None and a.arg_number == i}


def _step(while_op: ir.Operation, index: int, loop) -> int | None:
    """The constant an induction variable grows by each trip (None: not an induction variable)."""
    body = while_op.regions[1].blocks[0]
    ret = list(body.operations)[-1]
    new = ret.operands[index]
    if _block_arg(new) is not None:
        return None
    op = _op(new)
    if op.name not in ("stablehlo.add", "stablehlo.subtract"):
        return None
    lhs, rhs = op.operands[0], op.operands[1]
    for var, inc, sign in ((lhs, rhs, 1), (rhs, lhs, 1)) if op.name == "stablehlo.add" else ((lhs, rhs, -1),):
        a = _block_arg(var)
        if a is not None and a.arg_number == index and _in_loop(a, while_op):
            step = constant_int(inc, loop=loop)
            return None if step is None else sign * step
    return None


def while_trip_count(op: ir.Operation) -> int | None:
    """Trips of a ``stablehlo.while`` when its bound is static, else None."""
    cond = op.regions[0].blocks[0]
    ret = list(cond.operations)[-1]
    if not ret.operands:
        return None
    compare = _op(ret.operands[0])
    if not isinstance(compare, ir.Operation) or compare.name != "stablehlo.compare":
        return None
    direction = str(compare.attributes["comparison_direction"])
    invariant = _invariant_args(op)
    loop = (None, invariant, op)
    lhs, rhs = compare.operands[0], compare.operands[1]
    for var, bound, flipped in ((lhs, rhs, False), (rhs, lhs, True)):
        arg = _block_arg(var)
        if arg is None or arg.arg_number in invariant:
            continue
        start = constant_int(op.operands[arg.arg_number])
        limit = constant_int(bound, loop=loop)
        step = _step(op, arg.arg_number, loop)
        if start is None or limit is None or not step:
            continue
        trips = _trips(direction, start, limit, step, flipped)
        bounds = int_range(var)
        if trips is None or bounds is None:
            return None
        last = start + trips * step  # the value that ends the loop: every value up to it must fit the counter
        return trips if bounds[0] <= last <= bounds[1] else None
    return None


def _trips(direction: str, start: int, limit: int, step: int, flipped: bool) -> int | None:
    """Trips from ``start`` by ``step`` until the comparison with ``limit`` fails; None when the counter moves
    away from its bound, steps over a ``!=`` bound, or the loop runs no trip at all."""
    kind = next((d for d in ("LT", "LE", "GT", "GE", "NE") if d in direction), None)
    if flipped:
        kind = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "NE": "NE"}.get(kind)
    if kind == "NE":
        distance = limit - start
        if distance == 0 or distance % step or distance // step <= 0:
            return None  # no trip, or a counter that steps over its bound and wraps around
        return distance // step
    span = {"LT": limit - start, "LE": limit - start + 1, "GT": start - limit, "GE": start - limit + 1}.get(kind)
    if span is None or span <= 0:
        return None
    if (kind in ("LT", "LE")) != (step > 0):
        return None  # it moves away from its bound: it ends only by wrapping
    return math.ceil(span / abs(step))
