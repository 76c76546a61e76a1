"""Attention over a paged KV cache inside a staged program: the kernel copies the pages its table lists."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from maxkernel_tpu_offline.staged import attention as staged_attention
from maxkernel_tpu_offline.staged import attention_match as staged_attention_match
from maxkernel_tpu_offline.staged import paged as staged_paged
from maxkernel_tpu_offline.staged import runtime as staged_runtime
from .test_staged import _interpret

TASK = Path(__file__).parent / "tasks" / "paged_decode"


def _reference():
    spec = importlib.util.spec_from_file_location("paged_decode_ref", TASK / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _decode_inputs(dtype, rows, seed=0):
    """f32 or bf16 inputs of the task's program: 3 sequences of 8 pages, uneven lengths, pages scattered."""
    n, hq, hkv, d, per_seq = 3, 8, 2, 128, 8
    keys = jax.random.split(jax.random.key(seed), 3)
    q = jax.random.normal(keys[0], (n, hq, d), dtype)
    k, v = (jax.random.normal(x, (n * per_seq, rows, hkv, d), dtype) for x in keys[1:])
    lengths = jnp.array([5, per_seq * rows, 3 * rows + 1], jnp.int32)
    table = jnp.asarray(np.random.default_rng(seed).permutation(n * per_seq).reshape(n, per_seq), jnp.int32)
    return q, k, v, lengths, table


class _Pallas:  # the page copies and their semaphores need the TPU interpreter
    def __getattr__(self, name):
        return getattr(pl, name)

    def pallas_call(self, *a, **kw):
        return pl.pallas_call(*a, interpret=pltpu.InterpretParams(), **kw)


def _run(program, args, block_keys):
    """The program through the staged runtime (kernels interpreted, ``block_keys`` keys a paged step) against
    itself; the paged kernel's calls: (k cache shape, pages per block, (first head, stride) of k and v, whether
    they share a cache), and the flash kernel's: ("flash", its per-item scalars)."""
    calls, paged, flash = [], staged_paged._paged_attention, staged_attention._flash_attention
    per_block = staged_paged._pages_per_block

    def spy(q, pages, read, **kw):
        cache, table = read(pages[0].cache), read(pages[0].table)
        size = per_block(table.shape[-2], cache.shape[1], cache[0].size * cache.dtype.itemsize, q.shape[1])
        assert pages[2] == size  # the block the kernel is given is the one its limits allow
        calls.append((cache.shape, size, [(x.head0, x.stride) for x in pages[:2]], pages[0].cache is pages[1].cache))
        return paged(q, pages, read, **kw)

    def flash_spy(q, k, v, jaxpr, plan, scalars, per_item, out_dtype):
        calls.append(("flash", per_item.shape))
        return flash(q, k, v, jaxpr, plan, scalars, per_item, out_dtype)

    with pytest.MonkeyPatch.context() as patch:
        _interpret(patch)
        patch.setattr(staged_paged, "pl", _Pallas())
        patch.setattr(staged_paged, "PAGED_BLOCK_KEYS", block_keys)
        patch.setattr(staged_attention, "_paged_attention", spy)
        patch.setattr(staged_attention, "_flash_attention", flash_spy)
        got = jax.jit(staged_runtime._with_kernels(program, len(args)))(*args)
    want = jax.jit(program)(*args)
    tol = 2e-2 if args[0].dtype == jnp.bfloat16 else 1e-4
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=tol, atol=tol)
    return calls


@pytest.mark.parametrize("dtype, block_keys", [(jnp.float32, 32), (jnp.bfloat16, 64), (jnp.bfloat16, 1024)])
def test_a_paged_decode_reads_its_pages_on_the_kernel_exactly(dtype, block_keys):
    """Scattered pages, lengths that end inside a page, mid-block and at the last key; several key blocks."""
    rows = 16 if dtype == jnp.bfloat16 else 8
    args = _decode_inputs(dtype, rows)
    calls = _run(_reference().computation, args, block_keys)
    # one kernel, reading the caches themselves, every head of each
    assert calls == [(args[1].shape, min(block_keys // rows, 8), [(0, 1), (0, 1)], False)]


def test_the_decode_program_never_gathers_its_cache():
    """Compiled (CPU, interpreted kernels), the program holds no array of the gathered keys' shape."""
    args = _decode_inputs(jnp.float32, 8)
    with pytest.MonkeyPatch.context() as patch:
        _interpret(patch)
        patch.setattr(staged_paged, "pl", _Pallas())
        text = jax.jit(staged_runtime._with_kernels(_reference().computation, 5)).lower(*args).compile().as_text()
        gathered = "f32[3,64,2,128]"  # (sequences, pages x rows, kv heads, dim)
        assert "gather" in jax.jit(_reference().computation).lower(*args).compile().as_text()
    assert gathered not in text


def test_per_sequence_lengths_are_one_scalar_per_batch_item():
    """Under vmap a sequence's length is a vector along the batch: the attention is found, the length read per
    item; a length that varies over a kv head's query group is not (the group is on the kernel's rows)."""
    args = _decode_inputs(jnp.float32, 8)
    jaxpr = jax.make_jaxpr(_reference().computation)(*args).jaxpr
    jaxpr, _ = staged_runtime._flattened(jaxpr, (), list(args))
    (plan,) = staged_attention_match._attention_plans(jaxpr, staged_runtime._repeats(jaxpr)).values()
    ((_, along),) = plan.batch_scalars()
    assert along == ("b0",) and plan.fold is not None and plan.scalars() == []

    def per_head_lengths(q, k, v, lengths):  # lengths (n, hq): differ within a group of q heads
        k, v = (jnp.repeat(x, 2, axis=2) for x in (k, v))
        s = jnp.einsum("nqhd,nkhd->nhqk", q, k)
        s = jnp.where(jnp.arange(k.shape[1]) < lengths[:, :, None, None], s, -1e30)
        return jnp.einsum("nhqk,nkhd->nqhd", jax.nn.softmax(s, axis=-1), v)

    shapes = [(2, 1, 4, 128), (2, 256, 2, 128), (2, 256, 2, 128)]
    inputs = [jnp.ones(s) for s in shapes] + [jnp.full((2, 4), 7, jnp.int32)]
    jaxpr = jax.make_jaxpr(per_head_lengths)(*inputs).jaxpr
    assert staged_attention_match._attention_plans(jaxpr, staged_runtime._repeats(jaxpr)) == {}


def test_pages_the_kernel_cannot_hold_as_tiles_are_gathered_as_before():
    """Page rows that are not whole sublane tiles (4 f32 rows): the pages are gathered in XLA and the flash
    kernel, one batch item a step, reads each sequence's length from its prefetched lengths."""
    args = _decode_inputs(jnp.float32, 4)
    assert _run(_reference().computation, args, 1024) == [("flash", (3 * 2,))]  # a length per (sequence, kv head)


def test_an_unrolled_prefill_over_a_cache_of_interleaved_k_and_v_heads_copies_each_page_once():
    """7p's form: sequences unrolled, each reading its pages by its row of the table, k at the even heads of
    a page and v at the odd ones, its length a scalar of the program, a causal mask over its last queries."""
    t, hq, hkv, d, rows, per_seq = 8, 4, 2, 128, 8, 8

    def prefill(queries, kv_pages, lengths, table):
        outs = []
        for i in range(2):
            q = queries[i * t:(i + 1) * t]
            pages = kv_pages[table[i]]
            k, v = (jnp.repeat(pages[:, :, h::2, :].reshape(-1, hkv, d), hq // hkv, axis=1) for h in (0, 1))
            scores = jnp.einsum("qhd,khd->hqk", q, k) * d ** -0.5
            q_pos = lengths[i] - t + jax.lax.broadcasted_iota(jnp.int32, scores.shape, 1)
            k_pos = jax.lax.broadcasted_iota(jnp.int32, scores.shape, 2)
            scores = jnp.where((q_pos < k_pos) | (k_pos >= lengths[i]), -1e30, scores)
            outs.append(jnp.einsum("hqk,khd->qhd", jax.nn.softmax(scores, axis=-1), v))
        return jnp.concatenate(outs)

    keys = jax.random.split(jax.random.key(3), 2)
    args = (jax.random.normal(keys[0], (2 * t, hq, d)), jax.random.normal(keys[1], (2 * per_seq, rows, 2 * hkv, d)),
            jnp.array([3 * rows + 5, per_seq * rows], jnp.int32),
            jnp.asarray(np.random.default_rng(1).permutation(2 * per_seq).reshape(2, per_seq), jnp.int32))
    calls = _run(prefill, args, 32)
    assert calls == [(args[1].shape, 4, [(0, 2), (1, 2)], True)] * 2


@pytest.mark.parametrize("read_keys, paged", [
    (lambda c, t: c[t].reshape(2, 64, 2, 128), True),  # whole pages, the page axis merged with the rows
    (lambda c, t: c[t][:, :, ::2].reshape(2, 32, 2, 128), False),  # every other page row: not whole pages
    (lambda c, t: c[t][:, :, :, :, :64].reshape(2, 64, 2, 64), False),  # part of the head dim
    (lambda c, t: c[t].transpose(0, 2, 1, 3, 4).reshape(2, 64, 2, 128), False),  # rows before pages
    (lambda c, t: c[t[:, :, None]].reshape(2, 64, 2, 128), False),  # an extra index dim
])
def test_only_whole_pages_merged_into_a_key_axis_are_read_as_pages(read_keys, paged):
    cache, table = jnp.zeros((16, 8, 2, 128)), jnp.zeros((2, 8), jnp.int32)
    jaxpr = jax.make_jaxpr(read_keys)(cache, table).jaxpr
    found = staged_paged._paged_source(jaxpr, jaxpr.outvars[0], staged_attention_match._producers(jaxpr))
    assert (found is not None) == paged
    if paged:
        assert found.cache is jaxpr.invars[0] and (found.head0, found.stride) == (0, 1)
