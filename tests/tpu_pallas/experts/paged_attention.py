"""Paged decode attention (6p), the way serving kernels do it: the page table and lengths are scalar-prefetched
into SMEM, the KV cache stays in HBM (``pl.ANY``), and each grid step DMAs one block of a sequence's pages into
VMEM (DMA semaphores), with an online softmax across blocks and the blocks past its length skipped.

Grid (sequence, page block). A page, cache[page] = [page_size, kv_heads, head_dim], is contiguous in the
cache's own layout, so each step copies whole pages and attends every kv head's query group to them.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

PAGES_PER_BLOCK = 16  # pages DMA'd and attended per grid step
MASKED = -1e30
LANES = 128


def _attend(q, k, v, valid, m_ref, l_ref, acc_ref, scale):
    """One online-softmax step of one kv head: q [group, D] against k, v [tokens, D]."""
    s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32) * scale
    s = jnp.where(valid, s, MASKED)
    m_prev = m_ref[...][:, :1]
    m_new = jnp.maximum(m_prev, s.max(axis=-1, keepdims=True))
    p = jnp.exp(s - m_new)
    alpha = jnp.exp(m_prev - m_new)
    l_ref[...] = jnp.broadcast_to(alpha * l_ref[...][:, :1] + p.sum(axis=-1, keepdims=True), l_ref.shape)
    m_ref[...] = jnp.broadcast_to(m_new, m_ref.shape)
    acc_ref[...] = alpha * acc_ref[...] + jnp.dot(p.astype(v.dtype), v, preferred_element_type=jnp.float32)


def _kernel(lens_ref, table_ref, q_ref, k_hbm, v_hbm, o_ref, k_buf, v_buf, sems, m_ref, l_ref, acc_ref, *,
            pages_per_block, scale):
    seq, block = pl.program_id(0), pl.program_id(1)
    kv_len = lens_ref[seq]
    _, page_size, kv_heads, head_dim = k_buf.shape
    tokens = pages_per_block * page_size

    @pl.when(block == 0)
    def _init():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(block * tokens < kv_len)
    def _block():
        copies = []
        for i in range(pages_per_block):  # one DMA per page for k and for v, all in flight at once
            page = table_ref[seq, block * pages_per_block + i]
            copies.append(pltpu.make_async_copy(k_hbm.at[page], k_buf.at[i], sems.at[0, i]))
            copies.append(pltpu.make_async_copy(v_hbm.at[page], v_buf.at[i], sems.at[1, i]))
        for copy in copies:
            copy.start()
        for copy in copies:
            copy.wait()
        group = q_ref.shape[1]
        positions = block * tokens + jax.lax.broadcasted_iota(jnp.int32, (group, tokens), 1)
        for h in range(kv_heads):
            k = k_buf[:, :, h, :].reshape(tokens, head_dim)
            v = v_buf[:, :, h, :].reshape(tokens, head_dim)
            _attend(q_ref[h], k, v, positions < kv_len, m_ref.at[h], l_ref.at[h], acc_ref.at[h], scale)

    @pl.when(block == pl.num_programs(1) - 1)
    def _store():
        o_ref[...] = (acc_ref[...] / l_ref[...][:, :, :1]).astype(o_ref.dtype)


def computation(queries, k_pages, v_pages, kv_lens, page_indices, cu_q_lens):
    n, hq, d = queries.shape
    page_size, hkv = k_pages.shape[1], k_pages.shape[2]
    per_seq = page_indices.shape[1]
    group = hq // hkv
    per_block = min(PAGES_PER_BLOCK, per_seq)
    q = queries[cu_q_lens[:n]].reshape(n, hkv, group, d)  # each sequence's one query row, heads by kv group
    kernel = functools.partial(_kernel, pages_per_block=per_block, scale=d**-0.5)
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((n, hkv, group, d), queries.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=2,
            grid=(n, per_seq // per_block),
            in_specs=[
                pl.BlockSpec((None, hkv, group, d), lambda s, b, lens, table: (s, 0, 0, 0)),
                pl.BlockSpec(memory_space=pl.ANY),
                pl.BlockSpec(memory_space=pl.ANY),
            ],
            out_specs=pl.BlockSpec((None, hkv, group, d), lambda s, b, lens, table: (s, 0, 0, 0)),
            scratch_shapes=[
                pltpu.VMEM((per_block, page_size, hkv, d), k_pages.dtype),
                pltpu.VMEM((per_block, page_size, hkv, d), v_pages.dtype),
                pltpu.SemaphoreType.DMA((2, per_block)),
                pltpu.VMEM((hkv, group, LANES), jnp.float32),
                pltpu.VMEM((hkv, group, LANES), jnp.float32),
                pltpu.VMEM((hkv, group, d), jnp.float32),
            ],
        ),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(kv_lens, page_indices, q, k_pages, v_pages)
    return out.reshape(n, hq, d)
