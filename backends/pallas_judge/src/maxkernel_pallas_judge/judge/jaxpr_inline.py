"""Calls of custom differentiation rules and remat, inlined: the program the checker receives holds only what
its forward pass computes.

A ``custom_jvp_call`` or ``custom_vjp_call`` (``jax.nn.relu`` is one; so is any ``jax.custom_jvp`` a module
writes) carries the primal computation as a jaxpr beside functions of the candidate's process (its JVP, its
forward and backward rules), which no other process can hold; ``checkpoint`` (remat) carries a policy
function. The forward program is the primal jaxpr alone, so each such equation is replaced by that jaxpr's
equations, at every depth, kernel bodies included (in the tracer, before the program leaves it).
"""

from __future__ import annotations

from typing import Any

from jax._src import core

#: primitive name -> the parameter holding the computation it runs forward
INLINED = {"custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "checkpoint": "jaxpr",
           "remat": "jaxpr"}


def _body(eqn) -> tuple[core.Jaxpr, list[Any]]:
    inner = eqn.params[INLINED[eqn.primitive.name]]
    if isinstance(inner, core.ClosedJaxpr):
        return inner.jaxpr, [core.Literal(c, core.get_aval(c)) for c in inner.consts]
    return inner, []


def _param(value: Any) -> Any:
    if isinstance(value, core.ClosedJaxpr):
        return value.replace(jaxpr=inline(value.jaxpr))
    if isinstance(value, core.Jaxpr):
        return inline(value)
    if isinstance(value, tuple) and any(isinstance(v, (core.ClosedJaxpr, core.Jaxpr)) for v in value):
        return tuple(_param(v) for v in value)
    return value


def inline(jaxpr: core.Jaxpr) -> core.Jaxpr:
    """``jaxpr`` with every custom-rule and remat call replaced by the computation it runs forward."""
    env: dict[core.Var, Any] = {}

    def read(atom):
        return env.get(atom, atom) if isinstance(atom, core.Var) else atom

    eqns = []
    for eqn in jaxpr.eqns:
        invars = [read(v) for v in eqn.invars]
        if eqn.primitive.name in INLINED:
            body, consts = _body(eqn)
            body = inline(body)
            inner: dict[core.Var, Any] = dict(zip(body.constvars, consts, strict=False))
            inner.update(zip(body.invars, invars, strict=False))
            for step in body.eqns:  # fresh variables each time: one body may be inlined at several places
                fresh = [core.Var(v.aval) if isinstance(v, core.Var) else v for v in step.outvars]
                inner.update((old, new) for old, new in zip(step.outvars, fresh, strict=True) if isinstance(old, core.Var))
                eqns.append(step.replace(invars=[inner.get(v, v) if isinstance(v, core.Var) else v
                                                 for v in step.invars], outvars=fresh))
            for outer, result in zip(eqn.outvars, body.outvars, strict=True):
                env[outer] = inner.get(result, result) if isinstance(result, core.Var) else result
            continue
        params = {k: _param(v) for k, v in eqn.params.items()}
        eqns.append(eqn.replace(invars=invars, params=params))
    outvars = [read(v) for v in jaxpr.outvars]
    return jaxpr.replace(eqns=eqns, outvars=outvars)


def inline_closed(closed: core.ClosedJaxpr) -> core.ClosedJaxpr:
    return closed.replace(jaxpr=inline(closed.jaxpr))
