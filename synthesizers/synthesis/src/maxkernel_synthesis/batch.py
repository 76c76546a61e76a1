"""The fallback: prove a leading batch axis independent, then run the whole reference per batch block.

Dependence analysis on the flattened program: a value is *batched* when its
axis 0 is the output's axis 0 (same extent, carried through every op that
keeps it: elementwise math, broadcasts that map axis 0 to axis 0, reshapes
that keep the leading extent, reductions and contractions over other axes,
transposes that leave axis 0 first, matmuls that carry it as a batch
dimension). An op that reads or moves data across axis 0 (a reduction over
it, a transpose or reshape that moves it, a slice of it) breaks the proof and
the template declines. Inputs without the batch axis (weights) are given to
every grid step whole.
"""

from __future__ import annotations

import numpy as np

from .ir import Declined, Program

ELEMENTWISE_LIKE = frozenset(["add", "sub", "mul", "div", "max", "min", "pow", "atan2", "rem", "neg", "exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sqrt", "rsqrt", "abs", "sign", "erf", "erfc", "floor", "ceil", "round", "sin", "cos", "tan", "is_finite", "not", "and", "or", "eq", "ne", "lt", "le", "gt", "ge", "integer_pow", "square", "select_n", "convert_element_type", "clamp", "erf_inv", "copy", "copy_p", "stop_gradient"])
REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin", "cumsum",
                        "cummax", "cumlogsumexp"})


def batched_inputs(program: Program) -> list[bool]:
    """Which inputs carry the independent batch axis 0; :class:`Declined` if the proof fails."""
    (out,) = program.outputs
    out_shape = program.shapes[out]
    if len(out_shape) < 2 or out_shape[0] < 2:
        raise Declined("the output has no leading batch axis to split")
    batch = out_shape[0]
    carries = {name: bool(program.shapes[name]) and program.shapes[name][0] == batch for name in program.inputs}

    def carried(x) -> bool:
        return isinstance(x, str) and carries.get(x, False)

    narrow = next((e for e in program.eqns if e.prim == "dot_general" and np.dtype(program.dtypes[e.outputs[0]]).itemsize < 4),
                  None)
    if narrow is not None:  # the reference's own code runs in the kernel, and Mosaic accumulates in 32 bits only
        raise Declined(f"a matmul with a {np.dtype(program.dtypes[narrow.outputs[0]]).name} result (Mosaic's MXU "
                       "accumulates in 32 bits; the staged kernels accumulate in f32 and round once)")
    for eqn in program.eqns:
        if not any(carried(x) for x in eqn.inputs):  # computed from weights and constants only: the same for every block
            for name in eqn.outputs:
                carries[name] = False
            continue
        if not _keeps_batch(eqn, program, batch, carried):
            raise Declined(f"{eqn.prim} moves or mixes data across the leading axis (extent {batch}), so blocks of "
                           "it are not independent")
        if len(eqn.outputs) != 1 or eqn.out_shapes[0][0] != batch:
            raise Declined(f"{eqn.prim} changes the leading axis")
        carries[eqn.outputs[0]] = True
    if not carried(out):
        raise Declined("the output does not carry the batch axis")
    return [carries[name] for name in program.inputs]


def _keeps_batch(eqn, program: Program, batch: int, carried) -> bool:
    """Whether an op whose input carries the batch axis keeps it as its own axis 0, rows apart."""
    p = eqn.prim
    if p in ELEMENTWISE_LIKE:
        return True
    if p == "broadcast_in_dim":
        dims = tuple(eqn.params["broadcast_dimensions"])
        return bool(dims) and dims[0] == 0
    if p in ("reshape", "squeeze", "expand_dims"):
        first = next(x for x in eqn.inputs if isinstance(x, str))
        shape = eqn.out_shapes[0]
        return bool(shape) and shape[0] == batch and program.shapes[first][0] == batch
    if p in REDUCTIONS:
        return 0 not in tuple(eqn.params.get("axes", (eqn.params.get("axis", -1),)))
    if p == "transpose":
        return tuple(eqn.params["permutation"])[:1] == (0,)
    if p == "dot_general":
        (lc, _), (lb, rb) = eqn.params["dimension_numbers"]
        lhs, rhs = eqn.inputs
        if carried(lhs) and carried(rhs):
            return tuple(lb)[:1] == (0,) and tuple(rb)[:1] == (0,)
        return carried(lhs) and 0 not in lc and not lb  # only the right side batched: its axis lands elsewhere
    return False
