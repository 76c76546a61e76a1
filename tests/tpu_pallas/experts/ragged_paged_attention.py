"""Ragged paged attention (7p), written as serving kernels write it: the lengths, page table, query offsets
and live-sequence count are scalar-prefetched; queries, the combined k/v cache and the output stay in HBM
(``pl.ANY``) and move by the kernel's own DMAs (semaphores); a grid step attends one block of one sequence's
pages with an online softmax, blocks past the sequence's length are skipped, dead slots get zero rows.

Grid (sequence, page block). The VMEM limit is sized from the chip the kernel is traced for
(``pltpu.get_tpu_info()``), which the judge must trace under the target's device to answer.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

PAGES_PER_BLOCK = 8
MASKED = -0.7 * float(jnp.finfo(jnp.float32).max)
LANES = 128


def _copy_pages(kv_hbm, kv_buf, sems, table_ref, seq, block):
    copies = [pltpu.make_async_copy(kv_hbm.at[table_ref[seq, block * kv_buf.shape[0] + i]], kv_buf.at[i], sems.at[i])
              for i in range(kv_buf.shape[0])]
    for copy in copies:
        copy.start()
    for copy in copies:
        copy.wait()


def _attend_block(q_buf, kv_buf, m_ref, l_ref, acc_ref, kv_len, block, scale):
    pages, page_size, combined, head_dim = kv_buf.shape
    kv_heads, tokens = combined // 2, pages * page_size
    rows, q_heads, _ = q_buf.shape
    group = q_heads // kv_heads
    q_pos = kv_len - rows + jax.lax.broadcasted_iota(jnp.int32, (rows * group, tokens), 0) // group
    k_pos = block * tokens + jax.lax.broadcasted_iota(jnp.int32, (rows * group, tokens), 1)
    visible = (k_pos <= q_pos) & (k_pos < kv_len)
    for h in range(kv_heads):  # the group of query heads that read kv head h, every query row at once
        q = q_buf[:, h * group:(h + 1) * group, :].astype(jnp.float32).reshape(rows * group, head_dim)
        k = kv_buf[:, :, 2 * h, :].reshape(tokens, head_dim)
        v = kv_buf[:, :, 2 * h + 1, :].reshape(tokens, head_dim)
        s = jax.lax.dot_general(q.astype(k.dtype), k, (((1,), (1,)), ((), ())),
                                preferred_element_type=jnp.float32) * scale
        s = jnp.where(visible, s, MASKED)
        m_prev = m_ref[h][:, :1]
        m_new = jnp.maximum(m_prev, s.max(axis=-1, keepdims=True))
        p = jnp.exp(s - m_new)
        alpha = jnp.exp(m_prev - m_new)
        l_ref[h] = jnp.broadcast_to(alpha * l_ref[h][:, :1] + p.sum(axis=-1, keepdims=True), l_ref.shape[1:])
        m_ref[h] = jnp.broadcast_to(m_new, m_ref.shape[1:])
        acc_ref[h] = alpha * acc_ref[h] + jnp.dot(p.astype(v.dtype), v, preferred_element_type=jnp.float32)


def _kernel(lens_ref, table_ref, starts_ref, live_ref, q_hbm, kv_hbm, o_hbm, q_buf, kv_buf, o_buf, sems, io_sem,
            m_ref, l_ref, acc_ref, *, scale):
    seq, block = pl.program_id(0), pl.program_id(1)
    kv_len, start, live = lens_ref[seq], starts_ref[seq], seq < live_ref[0]
    rows, q_heads, head_dim = q_buf.shape
    tokens = kv_buf.shape[0] * kv_buf.shape[1]
    kv_heads = kv_buf.shape[2] // 2
    group = q_heads // kv_heads

    @pl.when(jnp.logical_and(block == 0, live))
    def _init():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)
        copy = pltpu.make_async_copy(q_hbm.at[pl.ds(start, rows)], q_buf, io_sem.at[0])
        copy.start()
        copy.wait()

    @pl.when(jnp.logical_and(live, block * tokens < kv_len))
    def _block():
        _copy_pages(kv_hbm, kv_buf, sems, table_ref, seq, block)
        _attend_block(q_buf, kv_buf, m_ref, l_ref, acc_ref, kv_len, block, scale)

    @pl.when(block == pl.num_programs(1) - 1)
    def _store():
        for h in range(kv_heads):
            out = jnp.where(live, acc_ref[h] / l_ref[h][:, :1], 0.0).reshape(rows, group, head_dim)
            o_buf[:, h * group:(h + 1) * group, :] = out.astype(o_buf.dtype)
        copy = pltpu.make_async_copy(o_buf, o_hbm.at[pl.ds(start, rows)], io_sem.at[1])
        copy.start()
        copy.wait()


def computation(queries, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs):
    tokens, hq, d = queries.shape
    page_size, combined = kv_pages.shape[1], kv_pages.shape[2]
    seqs, per_seq = page_indices.shape
    rows, hkv = tokens // seqs, combined // 2
    per_block = min(PAGES_PER_BLOCK, per_seq)
    vmem_limit = min(64 << 20, pltpu.get_tpu_info().vmem_capacity_bytes // 2)  # the traced-for chip's VMEM
    return pl.pallas_call(
        functools.partial(_kernel, scale=d**-0.5),
        out_shape=jax.ShapeDtypeStruct(queries.shape, queries.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4,
            grid=(seqs, per_seq // per_block),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=[
                pltpu.VMEM((rows, hq, d), queries.dtype),
                pltpu.VMEM((per_block, page_size, combined, d), kv_pages.dtype),
                pltpu.VMEM((rows, hq, d), queries.dtype),
                pltpu.SemaphoreType.DMA((per_block,)),
                pltpu.SemaphoreType.DMA((2,)),
                pltpu.VMEM((hkv, rows * (hq // hkv), LANES), jnp.float32),
                pltpu.VMEM((hkv, rows * (hq // hkv), LANES), jnp.float32),
                pltpu.VMEM((hkv, rows * (hq // hkv), d), jnp.float32),
            ],
        ),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary", "arbitrary"),
                                             vmem_limit_bytes=vmem_limit),
    )(kv_lens, page_indices, cu_q_lens, num_seqs, queries, kv_pages)
