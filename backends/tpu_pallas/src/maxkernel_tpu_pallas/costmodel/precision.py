"""At what matmul precision the XLA reference must run to pass the task's own check (runs in the reference worker).

On a TPU, XLA computes an f32 matmul in one bf16 pass by default. A kernel
judged against an f32 task must be held against an XLA reference that would
itself pass that task's tolerance, not against a one-pass program that would
fail it: that is the like-for-like reference. The CPU runs f32 matmuls
exactly, so the TPU's algorithms are emulated here (operands rounded to bf16,
or split into bf16 high and low parts for bf16x3) on the task's check inputs,
and the cheapest one whose outputs pass the task's tolerance against the exact
outputs is the precision the reference is compiled and estimated at.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jex_core

from maxkernel_pallas_judge.judge.compare import compare

#: (bf16 passes, jax.default_matmul_precision name), cheapest first.
LEVELS = ((1, "default"), (3, "high"), (6, "highest"))
MATMULS = ("dot_general", "conv_general_dilated")


def _is_f32(x) -> bool:
    return getattr(x, "dtype", None) == jnp.float32


def _split(x):
    hi = x.astype(jnp.bfloat16)
    return hi, (x - hi.astype(jnp.float32)).astype(jnp.bfloat16)


def _emulated(eqn, args, passes: int):
    """One f32 matmul as the TPU computes it in ``passes`` bf16 passes (f32 accumulation)."""
    params = dict(eqn.params)
    params["preferred_element_type"] = jnp.float32
    params.pop("precision", None)
    bind = lambda a, b: eqn.primitive.bind(a, b, **params, precision=None)  # noqa: E731
    lhs, rhs, *rest = args
    if passes == 1:
        out = bind(lhs.astype(jnp.bfloat16), rhs.astype(jnp.bfloat16))
    else:
        (lh, ll), (rh, rl) = _split(lhs), _split(rhs)
        out = bind(lh, rh) + bind(lh, rl) + bind(ll, rh)
    return out.astype(eqn.outvars[0].aval.dtype)


def _retraced(closed, passes: int):
    """A sub-jaxpr (of a jit, scan, cond, while) with its matmuls emulated, as a new closed jaxpr."""
    avals = [v.aval for v in closed.jaxpr.invars]
    return jax.make_jaxpr(lambda *a: evaluate(closed.jaxpr, closed.consts, a, passes))(*avals)


def _params(eqn, passes: int) -> dict[str, Any]:
    params = {}
    for key, value in eqn.params.items():
        if isinstance(value, jex_core.ClosedJaxpr):
            params[key] = _retraced(value, passes)
        elif isinstance(value, tuple) and value and all(isinstance(v, jex_core.ClosedJaxpr) for v in value):
            params[key] = tuple(_retraced(v, passes) for v in value)
        else:
            params[key] = value
    return params


def evaluate(jaxpr, consts, args, passes: int):
    """Run ``jaxpr`` with every f32 matmul computed as ``passes`` bf16 passes."""
    env: dict[Any, Any] = {}

    def read(v):
        return v.val if isinstance(v, jex_core.Literal) else env[v]

    for var, value in zip(jaxpr.constvars, consts, strict=True):
        env[var] = value
    for var, value in zip(jaxpr.invars, args, strict=True):
        env[var] = value
    for eqn in jaxpr.eqns:
        values = [read(v) for v in eqn.invars]
        if eqn.primitive.name in MATMULS and _is_f32(values[0]) and _is_f32(values[1]) and passes < 6:
            outs = [_emulated(eqn, values, passes)]
        else:
            params = eqn.primitive.get_bind_params(_params(eqn, passes))
            with eqn.ctx.manager:
                outs = eqn.primitive.bind(*values, **params)
            outs = outs if eqn.primitive.multiple_results else [outs]
        for var, value in zip(eqn.outvars, outs, strict=True):
            env[var] = value
    return [read(v) for v in jaxpr.outvars]


def has_f32_matmul(closed) -> bool:
    from maxkernel_pallas_judge.judge.work import _sub_jaxprs

    def walk(jaxpr) -> bool:
        for eqn in jaxpr.eqns:
            if eqn.primitive.name in MATMULS and all(_is_f32(v.aval) for v in eqn.invars[:2]):
                return True
            if any(walk(sub) for sub, _ in _sub_jaxprs(eqn)):
                return True
        return False

    return walk(closed.jaxpr)


def reference_precision(fn, sets: list[dict[str, Any]], expected: list[list[np.ndarray]], atol, rtol) -> dict[str, Any]:
    """The cheapest TPU matmul precision at which the reference passes its own check on the check sets:
    ``{"passes", "precision", "why"}``."""
    if not sets:
        return {"passes": 1, "precision": "default", "why": "no check inputs to decide on: XLA's default (one pass)"}
    closed = [jax.make_jaxpr(lambda *d, _s=s["static"]: fn(*d, *_s))(*s["dynamic"]) for s in sets]
    if not any(has_f32_matmul(c) for c in closed):
        return {"passes": 1, "precision": "default", "why": "no f32 matmul: every matmul is one bf16 pass"}
    for passes, name in LEVELS[:-1]:
        for c, s, exp in zip(closed, sets, expected, strict=True):
            got = jax.jit(lambda *d, _c=c, _p=passes: evaluate(_c.jaxpr, _c.consts, d, _p))(*s["dynamic"])
            ok, why, _ = compare(exp, [np.asarray(g) for g in jax.tree_util.tree_leaves(got)], atol, rtol)
            if not ok:
                break
        else:
            return {"passes": passes, "precision": name,
                    "why": f"bf16x{passes} f32 matmuls pass the task's tolerance on its {len(sets)} check sets"}
        failed = why
    return {"passes": 6, "precision": "highest",
            "why": f"f32 matmuls need full precision: bf16x3 fails the task's tolerance ({failed[:160]})"}
