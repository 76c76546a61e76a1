"""The synthesizer's shared vocabulary, at the bottom of its imports: a reference flattened to one program.

Every other module (the dispatcher in ``analysis.py``, each template) reads
references through these types; this module imports none of them.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from attrs import define, field
from jax.extend import core as jex_core

INLINE = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "custom_jvp_call": "call_jaxpr",
          "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr", "remat": "jaxpr",
          "checkpoint": "jaxpr"}
ELEMENTWISE = frozenset(["add", "sub", "mul", "div", "max", "min", "pow", "atan2", "rem", "neg", "exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sqrt", "rsqrt", "abs", "sign", "erf", "erfc", "floor", "ceil", "round", "sin", "cos", "tan", "is_finite", "not", "and", "or", "eq", "ne", "lt", "le", "gt", "ge", "integer_pow", "square", "select_n", "convert_element_type", "clamp", "erf_inv"])
SHAPE_ONLY = frozenset({"broadcast_in_dim", "reshape", "squeeze", "expand_dims", "copy", "copy_p", "stop_gradient"})
LAST_AXIS_REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min", "argmax", "argmin"})


class Declined(Exception):
    """No template fits this computation; the message says why (for the user and the coverage table)."""


@define
class Eqn:
    prim: str
    inputs: list[Any]  # Var ids (str) or literal values
    outputs: list[str]
    params: dict[str, Any]
    out_shapes: list[tuple[int, ...]]
    out_dtypes: list[str]
    #: input position -> Python expression, for literals that depend on the input size (jnp.mean's 1/D)
    literal_exprs: dict[int, str] = field(factory=dict)
    #: the output shape as a Python expression of the dims, for a shape op that runs outside the kernel (a tail)
    shape_expr: str | None = None


@define
class Program:
    """The reference flattened to one list of equations over named values."""

    inputs: list[str]
    outputs: list[str]
    eqns: list[Eqn]
    shapes: dict[str, tuple[int, ...]] = field(factory=dict)
    dtypes: dict[str, str] = field(factory=dict)
    closed: Any = None  # the traced ClosedJaxpr (loop bodies intact), for the staged template


def flatten(closed) -> Program:
    """Inline nested calls so the templates see one straight-line program."""
    counter = iter(range(1 << 30))
    program = Program([], [], [])

    def name_of(env, v):
        if isinstance(v, jex_core.Literal):
            return v.val
        return env[v]

    def fresh(v) -> str:
        name = f"v{next(counter)}"
        program.shapes[name] = tuple(int(d) for d in v.aval.shape)
        program.dtypes[name] = str(v.aval.dtype)
        return name

    def walk(jaxpr, consts, args) -> list:
        env = {}
        for var, value in zip(jaxpr.constvars, consts, strict=False):
            if getattr(value, "shape", ()) not in ((), (1,)):
                raise Declined("the reference closes over an array constant")
            env[var] = float(value) if hasattr(value, "shape") else value
        env.update(zip(jaxpr.invars, args, strict=False))
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            ins = [name_of(env, v) for v in eqn.invars]
            if name in INLINE and INLINE[name] in eqn.params:
                sub = eqn.params[INLINE[name]]
                inner, inner_consts = (sub.jaxpr, sub.consts) if hasattr(sub, "jaxpr") else (sub, ())
                outs = walk(inner, inner_consts, ins)
                env.update(zip(eqn.outvars, outs, strict=False))
                continue
            outs = [fresh(v) for v in eqn.outvars]
            program.eqns.append(Eqn(name, ins, outs, dict(eqn.params), [program.shapes[o] for o in outs],
                                    [program.dtypes[o] for o in outs]))
            env.update(zip(eqn.outvars, outs, strict=False))
        return [name_of(env, v) for v in jaxpr.outvars]

    program.inputs = [fresh(v) for v in closed.jaxpr.invars]
    program.outputs = walk(closed.jaxpr, closed.consts, program.inputs)
    return program


def trace_reference(fn, shapes, static) -> Program:
    closed = jax.make_jaxpr(lambda *d: fn(*d, *static))(*shapes)
    program = flatten(closed)
    program.closed = closed
    return program


def bind_size_literals(full: Program, small: Program, dims_full: dict[str, int], dims_small: dict[str, int]) -> None:
    """Mark literals of ``full`` whose value changes with the input size, as expressions of the dims.

    The reference is traced at full size, so ``jnp.mean`` over D leaves a literal
    ``8192.0`` that must read ``d`` at the small size. Comparing with a trace at the
    small size finds every such literal; each must be a dim, its reciprocal, or a
    product of two dims, else the computation is declined.
    """
    if len(full.eqns) != len(small.eqns):
        raise Declined("the reference's program changes with the input size (it is not shape-generic)")
    names = list(dims_full)
    options = {n: (dims_full[n], dims_small[n]) for n in names}
    options.update({f"{a} * {b}": (dims_full[a] * dims_full[b], dims_small[a] * dims_small[b])
                    for i, a in enumerate(names) for b in names[i:]})
    for eq_full, eq_small in zip(full.eqns, small.eqns, strict=False):
        if eq_full.prim != eq_small.prim:
            raise Declined("the reference's program changes with the input size (it is not shape-generic)")
        for pos, (lf, ls) in enumerate(zip(eq_full.inputs, eq_small.inputs, strict=False)):
            if isinstance(lf, str) or isinstance(ls, str) or float(lf) == float(ls) or (
                    np.isnan(float(lf)) and np.isnan(float(ls))):  # jnp.var's NaN for an empty axis: a constant
                continue
            for expr, (vf, vs) in options.items():
                if float(lf) == vf and float(ls) == vs:
                    integer = np.issubdtype(np.asarray(lf).dtype, np.integer)  # an index offset stays an int
                    eq_full.literal_exprs[pos] = f"({expr})" if integer else f"float({expr})"
                    break
                if float(lf) == 1.0 / vf and float(ls) == 1.0 / vs:
                    eq_full.literal_exprs[pos] = f"(1.0 / ({expr}))"
                    break
            else:
                raise Declined(f"a constant of {eq_full.prim} changes with the input size ({lf} at full size, {ls} "
                               "at small size) in a way the synthesizer cannot express")


def bind_tail_shapes(full: list[Eqn], small: list[Eqn], dims_full: dict[str, int], dims_small: dict[str, int]) -> None:
    """Give each shape op of a tail that runs outside the kernel (on the whole array, in XLA) its output shape as
    an expression of the dims: a dim that changes with the input size must be one of them."""
    for eq_full, eq_small in zip(full, small, strict=True):
        if eq_full.prim not in SHAPE_ONLY:
            continue
        parts = []
        for vf, vs in zip(eq_full.out_shapes[0], eq_small.out_shapes[0], strict=True):
            name = next((n for n in dims_full if (dims_full[n], dims_small[n]) == (vf, vs)), None)
            if vf != vs and name is None:
                raise Declined(f"the tail's {eq_full.prim} to {eq_full.out_shapes[0]} has a dim ({vf} at full size, "
                               f"{vs} at small size) that is none of the kernel's sizes")
            parts.append(str(vf) if vf == vs else name)
        eq_full.shape_expr = f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"
