"""Python source for a row-view program: one readable line per equation, run on VMEM blocks.

Every value lives in the kernel as a 2-D block: ``row`` values are ``(rows, D)``,
``rowred`` values ``(rows, 1)``, ``col`` values ``(1, D)``, scalars plain
numbers or ``(1, 1)``; numpy broadcasting between them is exactly what the
reference's ``broadcast_in_dim`` did, so shape-only ops become plain
assignments. Reductions keep their axis (``keepdims=True``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .groups import reduce_text
from .ir import Declined, Eqn

BINARY = {"add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "div": "{0} / {1}",
          "max": "jnp.maximum({0}, {1})", "min": "jnp.minimum({0}, {1})", "pow": "jnp.power({0}, {1})",
          "atan2": "jnp.arctan2({0}, {1})", "rem": "jnp.remainder({0}, {1})",
          "eq": "{0} == {1}", "ne": "{0} != {1}", "lt": "{0} < {1}", "le": "{0} <= {1}", "gt": "{0} > {1}",
          "ge": "{0} >= {1}", "and": "{0} & {1}", "or": "{0} | {1}"}
UNARY = {"neg": "-{0}", "exp": "jnp.exp({0})", "exp2": "jnp.exp2({0})", "log": "jnp.log({0})",
         "log1p": "jnp.log1p({0})",
         # expm1 has no Pallas TPU lowering; exp - 1 is off by at most one f32 ulp of 1 (1.2e-7) near 0
         "expm1": "(jnp.exp({0}) - 1.0)", "tanh": "jnp.tanh({0})",
         "logistic": "jax.nn.sigmoid({0})", "sqrt": "jnp.sqrt({0})", "rsqrt": "jax.lax.rsqrt({0})",
         # erfc has no Pallas TPU lowering; 1 - erf loses relative precision only where erfc < 1e-7,
         # which matters to nothing here (exact GELU multiplies it by x).
         "abs": "jnp.abs({0})", "sign": "jnp.sign({0})", "erf": "jax.lax.erf({0})", "erfc": "(1.0 - jax.lax.erf({0}))",
         "erf_inv": "jax.lax.erf_inv({0})", "floor": "jnp.floor({0})", "ceil": "jnp.ceil({0})",
         "round": "jnp.round({0})", "stop_gradient": "{0}", "sin": "jnp.sin({0})", "cos": "jnp.cos({0})", "tan": "jnp.tan({0})",
         # Mosaic tests finiteness of f32 only ("tpu.weird"); the upcast of a bf16 value is exact.
         "is_finite": "jnp.isfinite(jnp.asarray({0}, jnp.float32))", "not": "~{0}", "square": "{0} * {0}", "copy": "{0}", "copy_p": "{0}"}
REDUCE = {"reduce_sum": "jnp.sum", "reduce_max": "jnp.max", "reduce_min": "jnp.min"}
#: Ops whose value, in the row view, is their operand's (numpy broadcasting does the rest).
SHAPE_ONLY = frozenset({"broadcast_in_dim", "reshape", "squeeze", "expand_dims", "stop_gradient", "copy", "copy_p"})


def literal(value: Any) -> str:
    value = np.asarray(value)
    if value.dtype == np.bool_:
        return repr(bool(value))
    if np.issubdtype(value.dtype, np.integer):
        return repr(int(value))
    number = float(value)
    if not np.isfinite(number):  # repr gives inf / nan, which are not Python literals
        return "float('nan')" if np.isnan(number) else ("-" if number < 0 else "") + "float('inf')"
    return short_float(number)


def short_float(number: float) -> str:
    """The shortest spelling of a traced float literal that rounds to the same value in every dtype a kernel
    may compute in: ``1e-06``, not ``9.999999974752427e-07`` (float32's nearest value to 1e-6)."""
    import ml_dtypes

    short = str(np.float32(number))
    if "." not in short and "e" not in short and "inf" not in short and "nan" not in short:
        short += ".0"
    same = all(dtype(float(short)) == dtype(number) for dtype in (np.float32, np.float16, ml_dtypes.bfloat16))
    return short if same else repr(number)


def elementwise_text(prim: str, args: list[str], params: dict[str, Any]) -> str | None:
    """An arithmetic op as Python source on its operands' texts; None for any other op."""
    if prim in BINARY:
        return BINARY[prim].format(*args)
    if prim in UNARY:
        return UNARY[prim].format(*args)
    if prim == "integer_pow":
        return f"{args[0]} ** {int(params['y'])}"
    return None


def emit(eqns: list[Eqn], names: dict[str, str], indent: str = "    ", *, group: int | None = None,
         group_reductions: frozenset[str] = frozenset()) -> list[str]:
    """Lines computing each equation's output; ``names`` maps values to Python names (extended here). The
    reductions named in ``group_reductions`` are over groups of ``group`` lanes (groups.py)."""

    def ref(x: Any) -> str:
        return names[x] if isinstance(x, str) else literal(x)

    lines = []
    for eqn in eqns:
        out = eqn.outputs[0]
        names[out] = out
        args = [eqn.literal_exprs.get(i) or ref(x) for i, x in enumerate(eqn.inputs)]
        p = eqn.prim
        if p in SHAPE_ONLY:
            # blocks broadcast by numpy rules and row statistics keep their axis: the value is its operand's,
            # under its operand's name (no `v5 = v4` line)
            names[out] = args[0] if isinstance(eqn.inputs[0], str) and 0 not in eqn.literal_exprs else f"({args[0]})"
            continue
        if elementwise_text(p, args, eqn.params) is not None:
            expr = elementwise_text(p, args, eqn.params)
        elif p == "convert_element_type":
            # jnp.asarray, not .astype: the operand may be a Python number (a static argument)
            expr = f"jnp.asarray({args[0]}, jnp.{np.dtype(eqn.params['new_dtype']).name})"
        elif p == "select_n":
            expr = f"jnp.where({args[0]}, {args[2]}, {args[1]})" if len(args) == 3 else \
                f"jax.lax.select_n({', '.join(args)})"
        elif p == "clamp":
            expr = f"jnp.clip({args[1]}, {args[0]}, {args[2]})"
        elif p in REDUCE and out in group_reductions:
            expr = reduce_text(p, args[0], group)
        elif p in REDUCE:
            expr = f"{REDUCE[p]}({args[0]}, axis=-1, keepdims=True)"
        elif p in ("argmax", "argmin"):
            expr = f"jnp.{p}({args[0]}, axis=-1, keepdims=True).astype(jnp.{np.dtype(eqn.params['index_dtype']).name})"
        elif p == "gather":  # one element per row (checked by the analysis): a one-hot select, exact
            expr = _row_gather(eqn, args)
        else:
            raise Declined(f"no emitter for {p}")
        lines.append(f"{indent}{out} = {expr}")
    return lines


def _row_gather(eqn: Eqn, args: list[str]) -> str:
    """``x[row, idx[row]]`` as ``sum(where(iota == idx, x, 0))`` over the row, with the gather's mode."""
    x, idx = args[:2]
    mode = str(eqn.params.get("mode", ""))
    if "CLIP" in mode:
        idx = f"jnp.clip({idx}, 0, {x}.shape[-1] - 1)"
    picked = (f"jnp.sum(jnp.where(jax.lax.broadcasted_iota(jnp.int32, {x}.shape, {x}.ndim - 1) == {idx}, "
              f"{x}.astype(jnp.float32), 0.0), axis=-1, keepdims=True)")
    if "FILL" in mode:  # the fill in f32: Mosaic has no lane broadcast of a 16-bit (rows, 1) select
        fill = eqn.params.get("fill_value")
        fill = "float('nan')" if fill is None else literal(fill)
        picked = f"jnp.where(({idx} >= 0) & ({idx} < {x}.shape[-1]), {picked}, {fill})"
    return f"{picked}.astype({x}.dtype)"
