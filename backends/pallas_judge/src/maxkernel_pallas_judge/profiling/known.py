"""Values a traced program knows before it runs: its constants, and small results computed only from them.

Splash attention's block masks, a megablox call's tile maps built from static
group sizes, a grid extent computed from them: these reach a ``pallas_call``
as scalar-prefetch operands or dynamic grid bounds, and the cost model can use
them (which blocks a step fetches, which ``pl.when`` arms run, how many steps
there are) only if it knows their values. This walk folds the program's
constants forward through equations whose inputs are all known and small; a
value that depends on an input is unknown and stays so.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from jax.extend import core as jex_core

#: Larger arrays are not folded (they are data, not the small tables a kernel's control reads).
MAX_ELEMENTS = 1 << 20
#: At most this many equations are evaluated per program (each may compile a small CPU computation).
MAX_EVALUATIONS = 256
#: Higher-order equations whose jaxpr takes the equation's operands one to one.
CALLS = ("pjit", "jit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr",
         "remat", "checkpoint")
#: Never evaluated while folding: kernels, host calls, randomness with effects.
NEVER = frozenset({"pallas_call", "pure_callback", "io_callback", "debug_callback", "while", "scan", "cond"})


def _small(avals) -> bool:
    return all(math.prod(getattr(a, "shape", ()) or (1,)) <= MAX_ELEMENTS for a in avals)


def call_jaxpr(eqn) -> tuple[jex_core.Jaxpr, list] | None:
    """(jaxpr, its consts) a call-like equation runs on its operands one to one, if it is one."""
    if eqn.primitive.name not in CALLS:
        return None
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        inner = eqn.params.get(key)
        consts = list(getattr(inner, "consts", []))
        inner = getattr(inner, "jaxpr", inner)
        if isinstance(inner, jex_core.Jaxpr) and len(inner.invars) == len(eqn.invars):
            return inner, consts
    return None


class Known:
    """Known values of one jaxpr's variables (numpy arrays), shared budget across nested calls."""

    def __init__(self, env: dict[Any, np.ndarray] | None = None, budget: list[int] | None = None) -> None:
        self.env = env or {}
        self.budget = budget if budget is not None else [MAX_EVALUATIONS]

    @classmethod
    def of(cls, closed_jaxpr) -> Known:
        consts = dict(zip(closed_jaxpr.jaxpr.constvars, closed_jaxpr.consts, strict=False))
        return cls({v: np.asarray(c) for v, c in consts.items() if _small([getattr(v, "aval", None)])})

    def value(self, atom) -> np.ndarray | None:
        if isinstance(atom, jex_core.Literal):
            return np.asarray(atom.val)
        return self.env.get(atom)

    def inner(self, jaxpr: jex_core.Jaxpr, outer_atoms, consts=()) -> Known:
        """The known values of a called jaxpr: its consts, and its operands that are known here."""
        env = {v: np.asarray(c) for v, c in zip(jaxpr.constvars, consts, strict=False)
               if _small([getattr(v, "aval", None)])}
        for v, a in zip(jaxpr.invars, outer_atoms, strict=False):
            known = self.value(a)
            if known is not None:
                env[v] = known
        return Known(env, self.budget)

    def fold(self, eqn) -> None:
        """Evaluate ``eqn`` when every operand is known and everything it touches is small."""
        if eqn.primitive.name in NEVER or self.budget[0] <= 0:
            return
        values = [self.value(v) for v in eqn.invars]
        if any(v is None for v in values) or not _small([v.aval for v in (*eqn.invars, *eqn.outvars)]):
            return
        self.budget[0] -= 1
        try:
            out = eqn.primitive.bind(*values, **eqn.params)
        except Exception:  # noqa: BLE001 - any failure simply leaves the value unknown
            return
        outs = out if eqn.primitive.multiple_results else [out]
        for var, val in zip(eqn.outvars, outs, strict=False):
            self.env[var] = np.asarray(val)
