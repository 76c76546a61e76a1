"""One traced program, exported twice: for the TPU, and in Pallas interpret mode for the CPU checks.

Runs in the tracer (the candidate's sandbox) right after ``computation`` was
traced on abstract inputs. Both exports are derived here from that one
captured jaxpr, not from further calls of the candidate's Python:

* the TPU program: the jaxpr lowered for the target chip (under its
  deviceless device, so Mosaic sees that chip), kernels as Mosaic custom
  calls. The checker compiles it (and on a TPU host, runs and times it).
* the CPU program: the same jaxpr with every ``pallas_call`` switched to
  interpret mode by the judge (the candidate never sees that flag), each
  kernel wrapped in a function named ``maxkernel_kernel_N`` so the checker can
  hold its structure against the TPU program's kernels.

Both leave as ``jax.export`` serializations: StableHLO bytes the checker reads
without importing anything of the candidate's.
"""

from __future__ import annotations

import itertools
from typing import Any

import jax
from jax import export
from jax.extend import core as jex_core

#: Prefix of the function each kernel becomes in the CPU program.
KERNEL_FUNCTION = "maxkernel_kernel_"


def _retrace(closed, counter) -> Any:
    avals = [v.aval for v in closed.jaxpr.invars]
    return jax.make_jaxpr(lambda *a: _evaluate(closed, a, counter))(*avals)


def _rewrite_param(value: Any, counter) -> Any:
    if isinstance(value, jex_core.ClosedJaxpr):
        return _retrace(value, counter)
    if isinstance(value, jex_core.Jaxpr):
        return _retrace(jex_core.ClosedJaxpr(value, ()), counter).jaxpr
    if isinstance(value, tuple) and any(isinstance(v, (jex_core.ClosedJaxpr, jex_core.Jaxpr)) for v in value):
        return tuple(_rewrite_param(v, counter) for v in value)
    return value


def _kernel_call(eqn, counter):
    params = {**eqn.params, "interpret": True}

    def kernel(*args):
        return eqn.primitive.bind(*args, **params)

    kernel.__name__ = f"{KERNEL_FUNCTION}{next(counter)}"
    return jax.jit(kernel)


def _evaluate(closed, args, counter) -> list[Any]:
    """Evaluate ``closed`` on ``args`` with every pallas_call, at any depth, in interpret mode."""
    jaxpr = closed.jaxpr
    env: dict[Any, Any] = {}

    def read(v):
        return v.val if isinstance(v, jex_core.Literal) else env[v]

    env.update(zip(jaxpr.constvars, closed.consts, strict=False))
    env.update(zip(jaxpr.invars, args, strict=False))
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        if eqn.primitive.name == "pallas_call":
            outs = _kernel_call(eqn, counter)(*ins)
        else:
            params = {k: _rewrite_param(v, counter) for k, v in eqn.params.items()}
            with eqn.ctx.manager:
                outs = eqn.primitive.bind(*ins, **eqn.primitive.get_bind_params(params))
        if not eqn.primitive.multiple_results:
            outs = [outs]
        for var, out in zip(eqn.outvars, outs, strict=False):
            env[var] = out
    return [read(v) for v in jaxpr.outvars]


def export_cpu_interpret(closed) -> bytes:
    """The captured program with its kernels in Pallas interpret mode, serialized for the CPU."""
    avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]
    counter = itertools.count()
    program = jax.jit(lambda *a: _evaluate(closed, a, counter))
    return bytes(export.export(program, platforms=["cpu"])(*avals).serialize())
