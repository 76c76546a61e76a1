"""The kernels of one program held to a chip's semantics, each on the very inputs the program gave it.

The checker's verdict outputs come from Pallas' plain interpreter (its jitted CPU program). For one input set
the program is also walked op by op, and every kernel it reaches is run twice on the same concrete inputs:
in the plain interpreter and in the chip's semantic interpreter (jax's TPU-semantics interpreter: DMAs that
land at their wait, output blocks that start uninitialised, out-of-bounds reads refused, uninitialised memory
hostile). Their outputs must agree. A kernel right only under the plain interpreter's semantics is wrong;
and no arithmetic outside the kernels is run any other way than the verdict's (running the whole program
under the semantic interpreter changed XLA's fusion of a bf16 tail around it, and with it the last bits of
results that were right: 23k's honest kernel read 4 values out of tolerance that way).

Kernels inside a loop or a branch are run as their loop or branch, in the plain interpreter: they are checked by
the plain run alone.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.extend import core as jex_core

from .compare import compare
from .program import interpreted_params

#: calls whose body is walked op by op (their kernels checked); other nested programs run as a whole
_WALKED = ("pjit", "closed_call", "core_call", "jit")


def _kernel(eqn, interpret, ins):
    outs = eqn.primitive.bind(*ins, **{**eqn.params, "interpret": interpret})
    return [np.asarray(o) for o in (outs if eqn.primitive.multiple_results else [outs])]


def first_difference(closed, args, semantics, atol, rtol, reset) -> str | None:
    """Why some kernel of ``closed`` computes otherwise under ``semantics`` than in the plain interpreter on
    the inputs the program gives it (``args``: concrete), or None. ``reset`` clears the semantic interpreter's
    state before each kernel."""
    found: list[str] = []
    counter = [0]

    def walk(jaxpr, consts, ins) -> list[Any]:
        env: dict[Any, Any] = dict(zip(jaxpr.constvars, consts, strict=False))
        env.update(zip(jaxpr.invars, ins, strict=False))

        def read(v):
            return v.val if isinstance(v, jex_core.Literal) else env[v]

        for eqn in jaxpr.eqns:
            values = [read(v) for v in eqn.invars]
            name = eqn.primitive.name
            if name == "pallas_call":
                outs = _compare_kernel(eqn, values, semantics, atol, rtol, reset, counter, found)
            elif name in _WALKED and "jaxpr" in eqn.params:
                inner = eqn.params["jaxpr"]
                inner_jaxpr, inner_consts = (inner.jaxpr, inner.consts) if hasattr(inner, "consts") else (inner, ())
                outs = walk(inner_jaxpr, inner_consts, values)
            else:
                with eqn.ctx.manager:
                    outs = eqn.primitive.bind(*values, **interpreted_params(eqn))
                outs = outs if eqn.primitive.multiple_results else [outs]
            if found:
                return []
            env.update(zip(eqn.outvars, outs, strict=False))
        return [read(v) for v in jaxpr.outvars]

    walk(closed.jaxpr, closed.consts, list(args))
    return found[0] if found else None


def _compare_kernel(eqn, values, semantics, atol, rtol, reset, counter, found) -> list[Any]:
    counter[0] += 1
    plain = _kernel(eqn, True, values)
    reset()
    try:
        chip = _kernel(eqn, semantics, values)
    except Exception as exc:
        found.append(f"kernel {counter[0]} fails under the TPU's semantics (jax's TPU-semantics interpreter): "
                     f"{type(exc).__name__}: {str(exc)[-600:]}")
        return plain
    ok, why, _ = compare(plain, chip, atol, rtol)
    if not ok:
        found.append(f"kernel {counter[0]} computes otherwise under the TPU's semantics (jax's TPU-semantics "
                     f"interpreter: DMAs land at their wait, output blocks start uninitialised, uninitialised "
                     f"memory holds anything) than in Pallas' plain interpreter, on the same inputs: {why}")
    return [jax.numpy.asarray(o) for o in plain]
