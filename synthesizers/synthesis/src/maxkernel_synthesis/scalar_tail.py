"""A reduction to one value (a loss: MSE, Huber, cross-entropy, KL divergence) as row-wise work plus a tail.

``mean((p - t) ** 2)`` mixes every row, so the row-wise template alone declines it. It splits
exactly, though: a full reduction of a row value is the same reduction of each row's reduction
over its last axis. The kernel computes those per-row statistics (rows x 1, the row-wise
template as it is), and the last reduction over rows plus the scalar ops after it (the mean's
division) run as a short tail on ``rows`` values, the glue a kernel may leave to XLA.

The rewrite keeps the whole program in one list (head, then tail), so size-dependent constants
in the tail (the mean's 1/(rows*D)) are bound to the dims like any other.
"""

from __future__ import annotations

import math

from .emit import BINARY, SHAPE_ONLY, UNARY, literal
from .ir import ELEMENTWISE, Declined, Eqn, Program

FULL_REDUCTIONS = {"reduce_sum": "jnp.sum", "reduce_max": "jnp.max", "reduce_min": "jnp.min"}


def split(program: Program, rows: int, d: int) -> tuple[Program, int, str] | None:
    """(the program with its first full reduction split per row, where the tail starts, the per-row value the
    kernel writes); None when the output is not one value reduced from row values."""
    out = program.shapes[program.outputs[0]]
    if math.prod(out) != 1 or rows * d < 2:
        return None
    index = next((i for i, e in enumerate(program.eqns) if e.prim in FULL_REDUCTIONS
                  and math.prod(e.out_shapes[0]) == 1 and math.prod(program.shapes[e.inputs[0]]) > 1), None)
    if index is None:
        return None
    eqn = program.eqns[index]
    src = program.shapes[eqn.inputs[0]]
    eqns = list(program.eqns)
    shapes, dtypes = dict(program.shapes), dict(program.dtypes)
    if math.prod(src) == rows * d and src and src[-1] == d:  # a row value: reduce each row first
        partial = f"{eqn.outputs[0]}_per_row"
        shapes[partial], dtypes[partial] = tuple(src[:-1]), eqn.out_dtypes[0]
        per_row = Eqn(eqn.prim, [eqn.inputs[0]], [partial], {**eqn.params, "axes": (len(src) - 1,)},
                      [tuple(src[:-1])], [eqn.out_dtypes[0]])
        rest = Eqn(eqn.prim, [partial], eqn.outputs, {**eqn.params, "axes": tuple(range(len(src) - 1))},
                   eqn.out_shapes, eqn.out_dtypes)
        eqns[index:index + 1] = [per_row, rest]
        tail_from = index + 1
    elif math.prod(src) == rows:  # already a row statistic
        partial, tail_from = eqn.inputs[0], index
    else:
        return None
    for tail in eqns[tail_from + 1:]:
        if math.prod(tail.out_shapes[0]) != 1 or not (tail.prim in ELEMENTWISE or tail.prim in SHAPE_ONLY):
            raise Declined(f"after the reduction to one value the reference runs {tail.prim} on a shape "
                           f"{tail.out_shapes[0]}: only scalar arithmetic may follow it")
    return Program(program.inputs, program.outputs, eqns, shapes, dtypes, program.closed), tail_from, partial


def tail_lines(eqns: list[Eqn], partial: str, indent: str = "    ",
               inputs: dict[str, str] | None = None) -> tuple[list[str], str]:
    """Python for the tail on the full per-row array (``partial`` in the module): lines and the result's name.
    ``inputs`` names the program's inputs the tail reads (a bias added after the statistic)."""
    from .emit import elementwise_text

    names = {**(inputs or {}), partial: "partial"}

    def ref(i: int, eqn: Eqn) -> str:
        x = eqn.inputs[i]
        return eqn.literal_exprs.get(i) or (names[x] if isinstance(x, str) else literal(x))

    lines = []
    for eqn in eqns:
        args = [ref(i, eqn) for i in range(len(eqn.inputs))]
        out = eqn.outputs[0]
        if eqn.prim in FULL_REDUCTIONS:
            expr = f"{FULL_REDUCTIONS[eqn.prim]}({args[0]})"
        elif eqn.prim == "broadcast_in_dim":
            dims = tuple(eqn.params["broadcast_dimensions"])
            expr = f"jax.lax.broadcast_in_dim({args[0]}, {eqn.shape_expr or eqn.out_shapes[0]!r}, {dims!r})"
        elif eqn.prim in SHAPE_ONLY:
            expr = f"jnp.reshape({args[0]}, {eqn.shape_expr or eqn.out_shapes[0]!r})"
        elif eqn.prim == "convert_element_type":
            expr = f"jnp.asarray({args[0]}, jnp.{eqn.out_dtypes[0]})"
        elif eqn.prim in BINARY or eqn.prim in UNARY or eqn.prim == "integer_pow":
            expr = elementwise_text(eqn.prim, args, eqn.params)
        else:
            raise Declined(f"no tail emitter for {eqn.prim}")
        names[out] = out
        lines.append(f"{indent}{out} = {expr}")
    return lines, names[eqns[-1].outputs[0]] if eqns else "partial"
