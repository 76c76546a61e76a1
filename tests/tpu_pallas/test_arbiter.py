"""Who is right where a kernel is finite and the task's reference is not: a bf16 reference whose variance
(E[x^2] - E[x]^2) rounds below zero gives NaN where a kernel that accumulates in f32 is finite. The reference
widened to f32 (``jobs._wide_outputs``) decides, and the verdict says which side was right
(``verdict.arbitrate``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from maxkernel_pallas_judge.judge.jobs import _wide_outputs
from maxkernel_pallas_judge.judge.verdict import arbitrate
from maxkernel_pallas_judge.judge.compare import compare


def norm(x):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(x * x, axis=-1, keepdims=True) - mean * mean
    return (x - mean) * jax.lax.rsqrt(var)


X = (1000.0 + jax.random.normal(jax.random.key(0), (4, 256))).astype(jnp.bfloat16)
SET = {"dynamic": [np.asarray(X)], "static": ()}
EXPECTED = [np.asarray(norm(X))]
#: a kernel that accumulates in f32 and rounds its result once to bf16
KERNEL = [np.asarray(norm(X.astype(jnp.float32)).astype(jnp.bfloat16))]


def test_the_bf16_reference_overflows_where_the_f32_kernel_does_not():
    ok, why, _ = compare(EXPECTED, KERNEL, 2e-2, 2e-2)
    assert not ok and "NaN/Inf" in why


def test_the_widened_reference_is_computed_only_where_the_reference_is_not_finite():
    wide = _wide_outputs(norm, SET, EXPECTED)
    assert len(wide) == 1 and np.isfinite(wide[0].astype(np.float32)).all() and wide[0].dtype == EXPECTED[0].dtype
    finite = [np.asarray(norm(X.astype(jnp.float32)).astype(jnp.bfloat16))]
    assert _wide_outputs(norm, SET, finite) == []


def test_a_kernel_that_matches_the_widened_reference_passes_and_says_why():
    _, why, d = compare(EXPECTED, KERNEL, 2e-2, 2e-2)
    ok, _, details = arbitrate(_wide_outputs(norm, SET, EXPECTED), KERNEL, why, d, 2e-2, 2e-2)
    assert ok and details["arbiter"] == "f32" and "NaN/Inf" in details["reference_disagreement"]


def test_a_kernel_wrong_against_both_is_refused_and_told_so():
    wrong = [KERNEL[0] + np.asarray(1.0, dtype=KERNEL[0].dtype)]
    _, why, d = compare(EXPECTED, wrong, 2e-2, 2e-2)
    ok, reason, _ = arbitrate(_wide_outputs(norm, SET, EXPECTED), wrong, why, d, 2e-2, 2e-2)
    assert not ok and reason.endswith("the kernel is wrong") and "widened to f32" in reason
