"""A kernel body's work per grid step, each ``pl.when`` arm weighted by the share of steps that take it.

Walks the body's jaxpr (loops by their trip counts, jits and custom rules
inline) and counts matmul shapes, element-ops, transcendentals and the bytes
of the body's own DMAs. A ``cond`` whose predicate ``scalars.Scalars`` can
evaluate at every grid step has each arm's work weighted by the share of steps
that take it (``runs``); one it cannot is charged its dearest arm at every
step. ``count`` fields count every arm, as the judge's work rule does.

A ``while`` loop's trips are run-time data (a loop with a static trip count is
a ``scan``): its body is counted once, and the body of each innermost one is
also kept as ``loop``, the work of one more trip, for the cost model to size
(``costmodel.resolve_dynamic_grids``) the way it sizes a run-time grid axis.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..judge.work import ARITHMETIC, _sub_jaxprs
from .known import call_jaxpr
from .scalars import Scalars

TRANSCENDENTAL = frozenset(["exp", "exp2", "expm1", "log", "log1p", "tanh", "logistic", "sin", "cos", "tan", "erf", "erfc", "erf_inv", "rsqrt", "sqrt", "cbrt", "pow", "atan2", "asin", "acos", "atan", "sinh", "cosh"])


def _dma_bytes(eqn) -> int:
    """Bytes one ``dma_start`` moves: its destination window (refs after their ``.at[...]`` transforms)."""
    from jax._src.pallas.mosaic.primitives import _dma_unflatten

    _src, dst, *_ = _dma_unflatten(eqn.params["tree"], [v.aval for v in eqn.invars])
    return math.prod(dst.shape) * np.dtype(dst.dtype).itemsize


def _new_work() -> dict[str, Any]:
    return {"dots": [], "elementwise": 0, "transcendental": 0, "dma_bytes": 0,
            "elementwise_runs": 0.0, "transcendental_runs": 0.0, "dma_bytes_runs": 0.0,
            "branches": {"weighted": 0, "dearest": 0}}


def _merge(into: dict[str, Any], arm: dict[str, Any], *, runs: bool) -> None:
    """Add an arm's counts (every arm is counted, as the judge counts); its runs only when ``runs``."""
    for key in ("elementwise", "transcendental", "dma_bytes"):
        into[key] += arm[key]
        if runs:
            into[f"{key}_runs"] += arm[f"{key}_runs"]
    into["dots"] += [d if runs else {**d, "runs": 0.0} for d in arm["dots"]]
    for key in ("weighted", "dearest"):
        into["branches"][key] += arm["branches"][key]
    if "loop" in arm:
        _merge(into.setdefault("loop", _new_work()), arm["loop"], runs=runs)


def _holds_while(jaxpr) -> bool:
    return any(eqn.primitive.name == "while" or any(_holds_while(sub) for sub, _ in _sub_jaxprs(eqn))
               for eqn in jaxpr.eqns)


def _arm_cost(arm: dict[str, Any]) -> tuple[float, float]:
    return (sum(2.0 * d["m"] * d["n"] * d["k"] * d["batch"] * d["runs"] for d in arm["dots"]),
            arm["elementwise_runs"] + arm["transcendental_runs"])


def _count_eqn(work: dict[str, Any], eqn, times: int, share: float) -> None:
    name = eqn.primitive.name
    if name == "dot_general":
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        lhs, rhs = eqn.invars[0].aval, eqn.invars[1].aval
        free_l = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
        free_r = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
        precision = eqn.params.get("precision")
        work["dots"].append({
            "m": math.prod(lhs.shape[d] for d in free_l), "n": math.prod(rhs.shape[d] for d in free_r),
            "k": math.prod(lhs.shape[d] for d in lc), "batch": math.prod(lhs.shape[d] for d in lb),
            "dtype": str(lhs.dtype), "count": times, "runs": times * share,
            **({"precision": str(precision)} if precision is not None else {}),
        })
    elif name == "dma_start":
        amount = times * _dma_bytes(eqn)
        work["dma_bytes"] += amount
        work["dma_bytes_runs"] += amount * share
    elif name in ARITHMETIC:
        # max of inputs and outputs: a reduction's work is the size of what it reads
        avals = [v.aval for v in (*eqn.outvars, *eqn.invars) if hasattr(getattr(v, "aval", None), "shape")]
        size = max([math.prod(a.shape) for a in avals] + [1])
        key = "transcendental" if name in TRANSCENDENTAL else "elementwise"
        work[key] += times * size
        work[f"{key}_runs"] += times * size * share


def body_work(jaxpr, scal: Scalars | None) -> dict[str, Any]:
    """The body's work per grid step: ``count`` fields as if every ``pl.when`` arm ran (the judge's rule),
    ``runs`` fields weighted by the share of steps that take each arm, where the control is known."""

    def walk(work, j, times: int, mask, sc: Scalars | None) -> None:
        share = 1.0 if mask is None else float(np.mean(mask))
        for eqn in j.eqns:
            if sc is not None:
                sc.step(eqn)
            if eqn.primitive.name == "cond":
                walk_cond(work, eqn, times, mask, sc)
                continue
            _count_eqn(work, eqn, times, share)
            call = call_jaxpr(eqn)
            if call is not None:
                walk(work, call[0], times, mask, sc.bind(call[0].invars, eqn.invars) if sc is not None else None)
                continue
            for sub, repeat in _sub_jaxprs(eqn):  # loops: the control inside them is not evaluated
                walk(work, sub, times * repeat, mask, None)
            if eqn.primitive.name == "while" and not _holds_while(eqn.params["body_jaxpr"].jaxpr):
                trip = _new_work()  # one more trip of an innermost run-time loop
                walk(trip, eqn.params["body_jaxpr"].jaxpr, times, mask, None)
                _merge(work.setdefault("loop", _new_work()), trip, runs=True)

    def walk_cond(work, eqn, times: int, mask, sc: Scalars | None) -> None:
        branches = [b.jaxpr for b in eqn.params["branches"]]
        index = sc.value(eqn.invars[0]) if sc is not None else None
        arms = []
        for b, branch in enumerate(branches):
            arm = _new_work()
            if index is not None:
                taken = np.broadcast_to(np.asarray(index) == b, (sc.size,))
                walk(arm, branch, times, taken if mask is None else (mask & taken), sc.bind(branch.invars, eqn.invars[1:]))
            else:
                walk(arm, branch, times, mask, None)
            arms.append(arm)
        if index is not None:
            work["branches"]["weighted"] += 1
            for arm in arms:
                _merge(work, arm, runs=True)
            return
        work["branches"]["dearest"] += 1  # unknown control: the dearest arm at every step, an upper bound
        dearest = max(range(len(arms)), key=lambda i: _arm_cost(arms[i]))
        for i, arm in enumerate(arms):
            _merge(work, arm, runs=i == dearest)

    work = _new_work()
    walk(work, jaxpr, 1, None, scal)
    return work
