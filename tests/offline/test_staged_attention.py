"""Attention inside a staged program: q·kᵀ, its elementwise tail, softmax and ·v as one flash kernel."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from maxkernel_tpu_offline.staged import attention as staged_attention
from maxkernel_tpu_offline.staged import runtime as staged_runtime
from ..helpers import assert_close
from .test_staged import _interpret

B, S, H, D = 2, 256, 2, 32


def _run(program, *args):
    """(the program through the staged runtime, interpreted; the reference; the flash calls' q shapes, kinds)."""
    calls = []
    kinds_of = staged_attention._block_kinds

    def spy(*a):
        kinds, variants = kinds_of(*a)
        calls.append((a[2], a[3], kinds, variants))
        return kinds, variants

    with pytest.MonkeyPatch.context() as patch:
        _interpret(patch)
        patch.setattr(staged_attention, "_block_kinds", spy)
        with jax.default_matmul_precision("highest"):
            got = jax.jit(staged_runtime._with_kernels(program, len(args)))(*args)
            want = jax.jit(program)(*args)
    assert_close(got, want, rtol=1e-4, atol=1e-4)  # outputs reach ~15
    return calls


def _normal(*shapes, seed=0):
    return [jax.random.normal(k, s, jnp.float32) for k, s in zip(jax.random.split(jax.random.key(seed), len(shapes)),
                                                                     shapes, strict=True)]


def test_causal_attention_between_projections_is_one_flash_kernel_that_skips_masked_blocks():
    def program(x, wq, wk, wv):
        q, k, v = ((x @ w).reshape(B, S, H, D) for w in (wq, wk, wv))
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) * D ** -0.5
        causal = jnp.tril(jnp.ones((S, S), dtype=bool))
        probs = jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1)
        return jnp.einsum("bhqk,bkhd->bqhd", probs, v)

    calls = _run(program, *_normal((B, S, 48), (48, H * D), (48, H * D), (48, H * D)))
    ((m, n, kinds, variants),) = calls
    assert (m, n) == (S, S)
    # 64-row query blocks, 128-key blocks: the upper right blocks are skipped, the diagonal ones run the mask,
    # the lower left ones run the scores without it (the select takes its scores case throughout)
    assert kinds.reshape(4, 2).tolist() == [[1, 0], [1, 0], [2, 1], [2, 1]]
    assert variants[0] == {} and list(variants[1].values()) == [1]


def test_unmasked_attention_with_padded_keys_and_the_weights_on_the_left():
    def program(q, k, v):
        probs = jax.nn.softmax(jnp.einsum("bhqd,bhkd->bhqk", q, k) / 3.0, axis=-1)
        return jnp.einsum("bhqk,bhkd->bhqd", probs, v)

    calls = _run(program, *_normal((B, H, 50, D), (B, H, 200, D), (B, H, 200, 16)))
    ((m, n, kinds, variants),) = calls
    assert (m, n) == (50, 200) and kinds.tolist() == [1, 1] and variants == [{}]  # 200 keys padded to 256


def test_grouped_query_attention_with_a_traced_length_reads_k_and_v_once():
    t, hq, hkv, n = 32, 4, 2, 256

    def program(q, k, v, length):
        k, v = (jnp.repeat(x, hq // hkv, axis=1) for x in (k, v))
        scores = jnp.einsum("qhd,khd->hqk", q, k, preferred_element_type=jnp.float32) * D ** -0.5
        q_pos = length - t + lax.broadcasted_iota(jnp.int32, scores.shape, 1)
        k_pos = lax.broadcasted_iota(jnp.int32, scores.shape, 2)
        scores = jnp.where((q_pos < k_pos) | (k_pos >= length), -1e30, scores)
        return jnp.einsum("hqk,khd->qhd", jax.nn.softmax(scores, axis=-1), v)

    q, k, v = _normal((t, hq, D), (n, hkv, D), (n, hkv, D))
    for length in (t, 100, n):
        ((m, keys, kinds, variants),) = _run(program, q, k, v, jnp.int32(length))
        # the group of 2 query heads per kv head is on the rows; the length is known only when the kernel runs
        assert (m, keys) == (2 * t, n) and set(kinds.tolist()) == {1} and variants == [{}]


def test_a_row_that_keeps_no_key_turns_block_skipping_off():
    def program(q, k, v):
        scores = jnp.einsum("bqd,bkd->bqk", q, k)
        rows, cols = (lax.broadcasted_iota(jnp.int32, scores.shape, a) for a in (1, 2))
        probs = jax.nn.softmax(jnp.where(cols < rows, scores, -1e9), axis=-1)  # row 0 keeps nothing: uniform
        return jnp.einsum("bqk,bkd->bqd", probs, v)

    ((_, _, kinds, _),) = _run(program, *_normal((B, S, D), (B, S, D), (B, S, D)))
    assert 0 not in kinds.tolist()


def test_a_matmul_that_ends_one_attention_and_begins_another_is_in_the_first_only():
    def program(q, k, v, w):
        out = jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(jnp.einsum("bqd,bkd->bqk", q, k), axis=-1), v)
        # out is also "scores": softmax over its last axis, then a matmul contracting that axis
        return jnp.einsum("bqd,bde->bqe", jax.nn.softmax(out, axis=-1), w)

    assert len(_run(program, *_normal((B, 64, D), (B, 64, D), (B, 64, D), (B, D, 16)))) == 1


@pytest.mark.parametrize("case", ["score-shaped-bias", "softmax-over-queries"])
def test_what_the_flash_kernel_cannot_run_stays_on_the_matmul_kernels(case):
    def program(q, k, v, bias):
        scores = jnp.einsum("bqd,bkd->bqk", q, k)
        if case == "score-shaped-bias":  # read from HBM per score: no cheaper than the scores themselves
            probs = jax.nn.softmax(scores + bias, axis=-1)
        else:
            probs = jax.nn.softmax(scores, axis=1)
        return jnp.einsum("bqk,bkd->bqd", probs, v)

    assert _run(program, *_normal((B, 64, D), (B, 64, D), (B, 64, D), (B, 64, 64))) == []
