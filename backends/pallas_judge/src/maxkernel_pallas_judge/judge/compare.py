"""Output comparison, in the parent process, on arrays sent back by the worker.

Shapes, dtypes, non-finite values and ``|got - ref| <= atol + rtol * |ref|``
per output, in float64. Nothing the candidate does in its own process can
reach this code.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes  # noqa: F401  (bfloat16 arrays)
import numpy as np


def _per_output(tol: float | tuple[float, ...], n: int) -> list[float]:
    if isinstance(tol, (int, float)):
        return [float(tol)] * n
    tol = list(tol)
    return tol + [tol[-1]] * (n - len(tol)) if tol else [0.0] * n


def compare(reference: list[np.ndarray], got: list[np.ndarray], atol, rtol) -> tuple[bool, str, dict[str, Any]]:
    """(passed, reason, details) for one input set."""
    if len(got) != len(reference):
        return False, f"returned {len(got)} output(s), the reference returns {len(reference)}", {}
    atols, rtols = _per_output(atol, len(reference)), _per_output(rtol, len(reference))
    worst_abs, worst_rel, details = 0.0, 0.0, {"outputs": []}
    for i, (ref, out) in enumerate(zip(reference, got, strict=False)):
        if out.shape != ref.shape:
            return False, f"output {i} has shape {out.shape}, expected {ref.shape}", details
        if out.dtype != ref.dtype:
            return False, f"output {i} has dtype {out.dtype}, expected {ref.dtype}", details
        # at least 1-d: a scalar output (a loss) must index like an array below
        r, o = np.atleast_1d(ref.astype(np.float64)), np.atleast_1d(out.astype(np.float64))
        bad_nonfinite = np.isfinite(r) & ~np.isfinite(o)
        if bad_nonfinite.any():
            where = tuple(int(x) for x in np.argwhere(bad_nonfinite)[0])
            return False, (f"output {i} has {int(bad_nonfinite.sum())} NaN/Inf value(s) where the reference is "
                           f"finite (first at index {where})"), details
        finite = np.isfinite(r)
        if not np.array_equal(np.isnan(r), np.isnan(o)) or not np.array_equal(r[~finite & ~np.isnan(r)], o[~finite & ~np.isnan(r)]):
            return False, f"output {i} differs from the reference in its NaN/Inf values", details
        err = np.abs(o - r)
        err[~finite] = 0.0
        with np.errstate(over="ignore"):  # an error over an exact zero is an infinite relative error: that is its value
            rel = err / np.maximum(np.abs(r), np.finfo(np.float64).tiny)
        allowed = atols[i] + rtols[i] * np.abs(r)
        over = err > allowed
        max_abs = float(err.max()) if err.size else 0.0
        max_rel = float(rel[finite].max()) if finite.any() else 0.0
        worst_abs, worst_rel = max(worst_abs, max_abs), max(worst_rel, max_rel)
        details["outputs"].append({"max_abs_error": max_abs, "max_rel_error": max_rel,
                                   "mismatched": int(over.sum()), "size": int(r.size)})
        if over.any():
            where = tuple(int(x) for x in np.argwhere(over)[0])
            return False, (f"output {i}: {int(over.sum())} of {r.size} values outside atol={atols[i]:g}, rtol={rtols[i]:g} "
                           f"(max abs error {max_abs:.3g}; first at index {where}: got {o[where]:.6g}, "
                           f"expected {r[where]:.6g})"), details
    details.update(max_abs_error=worst_abs, max_rel_error=worst_rel)
    return True, "", details


def distance(reference: list[np.ndarray], got: list[np.ndarray], atol, rtol) -> dict[str, Any]:
    """How far ``got`` is from ``reference`` over every output (unlike ``compare``, which stops at the first
    failing one): the largest absolute error, and how many values are outside the tolerance. A value that is
    not finite where the reference is finite, or differs from a non-finite reference value (NaN where NaN, the
    same infinity), counts as outside at an infinite error; a different count, shape or dtype of outputs is
    ``mismatched == -1``."""
    if len(got) != len(reference) or any(g.shape != r.shape or g.dtype != r.dtype
                                         for g, r in zip(got, reference, strict=False)):
        return {"max_abs_error": float("inf"), "mismatched": -1, "size": 0}
    atols, rtols = _per_output(atol, len(reference)), _per_output(rtol, len(reference))
    worst, mismatched, size = 0.0, 0, 0
    for ref, out, a, r_tol in zip(reference, got, atols, rtols, strict=False):
        r, o = np.atleast_1d(ref.astype(np.float64)), np.atleast_1d(out.astype(np.float64))
        finite = np.isfinite(r)
        with np.errstate(invalid="ignore"):
            same_special = (np.isnan(r) & np.isnan(o)) | (~np.isnan(r) & (o == r))
            err = np.where(finite, np.abs(o - r), np.where(same_special, 0.0, np.inf))
        err = np.where(np.isnan(err), np.inf, err)
        mismatched += int((err > a + r_tol * np.where(finite, np.abs(r), 0.0)).sum())
        worst = max(worst, float(err.max()) if err.size else 0.0)
        size += int(r.size)
    return {"max_abs_error": worst, "mismatched": mismatched, "size": size}
