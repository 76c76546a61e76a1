"""One traced program run on the CPU: the same jaxpr the device program is lowered from, with every
``pallas_call`` switched to Pallas' interpreter by the judge (the candidate never sees that flag).

Runs in the checker, on the jaxpr the tracer sent (``jaxpr_wire``): the CPU program and the device program
are made from one captured program by the judge's code. ``interpreted`` evaluates it in this process (the
TPU-semantics interpreter works through host callbacks, which no export carries); ``export_cpu_interpret``
serializes it for the CPU, each kernel wrapped in a function named ``maxkernel_kernel_N`` (the tests'
stand-in chip runs that program as its device program).
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


class _Counter:
    """Numbers the kernels, and carries the interpreter every ``pallas_call`` is bound with."""

    def __init__(self, interpret: Any = True) -> None:
        self.interpret = interpret
        self._numbers = itertools.count()

    def __next__(self) -> int:
        return next(self._numbers)


def _rewrite_param(value: Any, counter) -> Any:
    if isinstance(value, jex_core.ClosedJaxpr):
        return _retrace(value, counter)
    if isinstance(value, jex_core.Jaxpr):
        return _retrace(jex_core.ClosedJaxpr(value, ()), counter).jaxpr
    if isinstance(value, tuple) and any(isinstance(v, (jex_core.ClosedJaxpr, jex_core.Jaxpr)) for v in value):
        return tuple(_rewrite_param(v, counter) for v in value)
    return value


def interpreted_params(eqn, interpret: Any = True) -> dict[str, Any]:
    """``eqn``'s bind parameters with every ``pallas_call`` nested in them (a loop's or a branch's body) in
    Pallas' interpreter."""
    counter = _Counter(interpret)
    return eqn.primitive.get_bind_params({k: _rewrite_param(v, counter) for k, v in eqn.params.items()})


def _kernel_call(eqn, counter, interpret: Any = True):
    params = {**eqn.params, "interpret": interpret}

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
            outs = _kernel_call(eqn, counter, getattr(counter, "interpret", True))(*ins)
        else:
            params = {k: _rewrite_param(v, counter) for k, v in eqn.params.items()}
            with eqn.ctx.manager:
                outs = eqn.primitive.bind(*ins, **eqn.primitive.get_bind_params(params))
        if not eqn.primitive.multiple_results:
            outs = [outs]
        for var, out in zip(eqn.outvars, outs, strict=False):
            env[var] = out
    return [read(v) for v in jaxpr.outvars]


def interpreted(closed, interpret: Any = True):
    """``closed`` as a jitted function of its inputs, every ``pallas_call`` in Pallas' interpreter (``interpret``:
    True, or ``pltpu.InterpretParams`` for the TPU-semantics interpreter)."""
    counter = _Counter(interpret)
    return jax.jit(lambda *a: _evaluate(closed, a, counter))


def export_cpu_interpret(closed) -> bytes:
    """The captured program with its kernels in Pallas interpret mode, serialized for the CPU."""
    avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]
    counter = itertools.count()
    program = jax.jit(lambda *a: _evaluate(closed, a, counter))
    return bytes(export.export(program, platforms=["cpu"])(*avals).serialize())
