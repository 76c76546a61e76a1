"""Fit the model's free parameters to measured times: least squares on log(predicted / measured).

A point (``fitset.py``) is predicted by the same code every estimate uses:
the kernel model on its kernels' descriptions, plus the XLA model on the code
around them (or on the whole program when it has no kernel of its own). The
fit minimises the squared log ratios, so a 2x miss counts the same on a 10 us
kernel and a 10 ms one. Continuous parameters are fitted (positive ones in log
space, shares within their bounds); the MXU's padding granules are discrete and
are chosen by trying each. Facts of a measurement the model cannot know (Python
dispatch inside a wall-clock timing, Mosaic's experimental scheduler) are
nuisance terms fitted alongside and never used in estimates.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
from attrs import frozen

from ..costmodel import estimate
from ..params import ModelParams
from ..xla_model import estimate_program

#: (low, high, log-scaled) bounds of each fittable parameter and nuisance term.
BOUNDS = {
    "step_overhead_s": (2e-8, 2e-5, True),
    "dma_efficiency": (0.3, 1.0, False),
    "mxu_efficiency": (0.3, 1.0, False),
    "elementwise_per_cycle": (32.0, 1e5, True),
    "transcendental_per_cycle": (8.0, 1e5, True),
    "f32_passes": (1.0, 6.0, False),
    "compute_serial": (0.0, 1.0, False),
    "xla_op_overhead_s": (1e-8, 2e-5, True),
    "dispatch_s": (1e-6, 1e-3, True),
    "scheduler_factor": (0.2, 1.5, False),
}
DISCRETE = ("mxu_pad_k", "mxu_pad_n")


@frozen
class FitResult:
    values: dict[str, float]  # the fitted model parameters (nuisance terms apart)
    nuisance: dict[str, float]
    params: ModelParams
    residuals: list[dict[str, Any]]  # per point: id, source, measured, predicted, log ratio

    def summary(self) -> dict[str, float]:
        return summarize([r["log_ratio"] for r in self.residuals])


def summarize(log_ratios: list[float]) -> dict[str, float]:
    errs = np.abs(np.asarray(log_ratios, float))
    if not len(errs):
        return {"points": 0}
    return {"points": int(len(errs)), "median_abs_log": float(np.median(errs)),
            "rms_log": float(np.sqrt(np.mean(errs ** 2))), "worst_ratio": float(np.exp(errs.max())),
            "within_1_5x": float(np.mean(errs <= math.log(1.5))), "within_2x": float(np.mean(errs <= math.log(2)))}


def predict(point: dict[str, Any], params: ModelParams, chip: dict[str, Any],
            nuisance: dict[str, float] | None = None) -> float:
    """The model's time for a point, nuisance terms of its measurement included."""
    seconds = 0.0
    if point.get("kernels"):
        # an expert's run-time trip counts are sized by its task's reference work, as a candidate's are
        seconds += estimate(point["kernels"], chip, point["target"], params=params,
                            reference_flops=point.get("reference_flops")).seconds
    for key in ("glue", "program"):
        if point.get(key):
            seconds += estimate_program(point[key], chip, params).seconds
    nuisance = nuisance or {}
    if point.get("scheduler") and "scheduler_factor" in nuisance:
        seconds *= nuisance["scheduler_factor"]
    if point.get("dispatch") and "dispatch_s" in nuisance:
        seconds += nuisance["dispatch_s"]
    return seconds


def _encode(name: str, value: float) -> float:
    low, high, log = BOUNDS[name]
    value = min(max(value, low), high)
    return math.log(value) if log else value


def _decode(name: str, x: float) -> float:
    return math.exp(x) if BOUNDS[name][2] else x


def _residuals(points, chips, base: ModelParams, names, nuisance_names, x) -> np.ndarray:
    values = {n: _decode(n, v) for n, v in zip(names + nuisance_names, x, strict=True)}
    params = base.with_values({n: values[n] for n in names}, base.source, "fit")
    nuisance = {n: values[n] for n in nuisance_names}
    return np.array([math.log(max(predict(p, params, chips[p["target"]], nuisance), 1e-12) / p["measured_s"])
                     for p in points])


def fit(points: list[dict[str, Any]], chips: dict[str, dict[str, Any]], base: ModelParams, names: list[str],
        nuisance: dict[str, float] | None = None, discrete: dict[str, list[int]] | None = None,
        source: str = "fit") -> FitResult:
    """Fit ``names`` (and the ``nuisance`` terms, from their starting values) on ``points``; every other
    parameter stays at ``base``'s value. ``discrete`` lists the values to try for the MXU padding granules."""
    from scipy.optimize import least_squares

    nuisance = dict(nuisance or {})
    nuisance_names = list(nuisance)
    names = [n for n in names if n not in DISCRETE]
    choices = discrete or {}
    best = None
    for combo in itertools.product(*choices.values()) if choices else [()]:
        start = base.with_values(dict(zip(choices, combo, strict=True)), base.source, "fit") if combo else base
        x0 = [_encode(n, getattr(start, n)) for n in names] + [_encode(n, v) for n, v in nuisance.items()]
        lows = [_encode(n, BOUNDS[n][0]) for n in names + nuisance_names]
        highs = [_encode(n, BOUNDS[n][1]) for n in names + nuisance_names]
        x0 = [min(max(v, lo + 1e-9), hi - 1e-9) for v, lo, hi in zip(x0, lows, highs, strict=True)]
        # The model is a max over units, so the squares have corners and local minima: from the given values
        # and from the middle of the bounds, the lower end kept (a start-dependent fit moved with the start).
        for x_start in (x0, [(lo + hi) / 2 for lo, hi in zip(lows, highs, strict=True)]) if x0 else ([],):
            x = least_squares(lambda x, s=start: _residuals(points, chips, s, names, nuisance_names, x), x_start,
                              bounds=(lows, highs), diff_step=1e-3, max_nfev=400).x if x_start else np.array([])
            cost = float(np.sum(_residuals(points, chips, start, names, nuisance_names, x) ** 2))
            if best is None or cost < best[0]:
                best = (cost, start, x, dict(zip(choices, combo, strict=True)))
    _, start, x, picked = best
    decoded = {n: _decode(n, v) for n, v in zip(names + nuisance_names, x, strict=True)}
    values = {**{n: decoded[n] for n in names}, **{k: float(v) for k, v in picked.items()}}
    params = base.with_values(values, source, source)
    fitted_nuisance = {n: decoded[n] for n in nuisance_names}
    rows = []
    for p in points:
        predicted = predict(p, params, chips[p["target"]], fitted_nuisance)
        rows.append({"id": p["id"], "source": p["source"], "cls": p.get("cls", ""), "measured_s": p["measured_s"],
                     "predicted_s": predicted, "log_ratio": math.log(predicted / p["measured_s"])})
    return FitResult(values, fitted_nuisance, params, rows)
