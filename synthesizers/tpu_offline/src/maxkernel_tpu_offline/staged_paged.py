"""Attention over a paged KV cache inside a staged program, copied verbatim into every staged candidate.

A decode reads its keys and values through a page table: ``k =
pages[table].reshape(...)`` gathers whole pages of a ``(pages, rows, heads,
dim)`` cache into ``(batch, pages per item x rows, heads, dim)``. Bound as the
reference binds it, XLA writes that gather to HBM and the kernel reads it back:
6p's two gathers cost 1.75 ms of its 4.7, three times the bytes of the cache it
reads. Here the table is scalar-prefetched and the kernel copies the pages it
needs itself (``make_async_copy``, whole pages, every head of a page at once:
32 KiB DMAs at 6p, not one per head), double-buffered across its key blocks, so
each page crosses HBM once. Grid ``(batch, key blocks)``, keys innermost and
"arbitrary"; a step runs the online softmax of ``staged_attention.py`` once per
kv head on that head's rows of the page buffer (a sublane-strided read), its
query group on the rows. No block is skipped: what the tail masks (the keys
past a sequence's length) is computed and weighs nothing, as in the reference.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from .staged_attention_match import _producers
from .staged_matmul import VMEM_LIMIT_BYTES

# --- the staged runtime (pasted into candidates from here on) ---
#: Keys per step (pages x rows), and the most one page buffer (one of k, v; one of two slots) may hold.
PAGED_BLOCK_KEYS, PAGED_BUFFER_BYTES = 1024, 4 << 20


def _paged_source(jaxpr, v, producer):
    """(pages var, table var) when ``v`` is ``pages[table].reshape(...)`` read as a key axis: a gather of whole
    pages along the cache's first axis by a ``(batch, pages per item, 1)`` table, the page axis merged with
    the page rows; else None."""
    reshape = jaxpr.eqns[producer[v]] if v in producer else None
    if reshape is None or reshape.primitive.name != "reshape" or reshape.params.get("dimensions") is not None:
        return None
    src = reshape.invars[0]
    gather = jaxpr.eqns[producer[src]] if src in producer else None
    if gather is None or gather.primitive.name != "gather":
        return None
    pages, table = gather.invars
    cache, index, dn = pages.aval.shape, table.aval.shape, gather.params["dimension_numbers"]
    whole_pages = (tuple(dn.collapsed_slice_dims) == (0,) and tuple(dn.start_index_map) == (0,)
                   and not tuple(dn.operand_batching_dims) and tuple(gather.params["slice_sizes"]) == (1, *cache[1:])
                   and tuple(dn.offset_dims) == tuple(range(len(index) - 1, len(index) + len(cache) - 2)))
    if not whole_pages or len(index) != 3 or index[-1] != 1 or len(cache) != 4 or table.aval.dtype != np.int32:
        return None
    merged = (index[0], index[1] * cache[1], *cache[2:])
    return (pages, table) if tuple(v.aval.shape) == merged else None


def _paged_sources(jaxpr, k, v, dims, dtype, query_rows):
    """((k cache, table), (v cache, table)) vars when k and v are both pages of ``(pages, rows, heads, dim)``
    caches (``_paged_source``) whose batch and heads are the products' batch dims (``dims``: the scores'
    k batch and contracting dims, the output's v batch and contracting dims), k's cache already of the
    product's dtype, and a key block fits (``_pages_per_block``); else None."""
    rb, rc, vb, vc = (tuple(x) for x in dims)
    producer = _producers(jaxpr)
    found = [_paged_source(jaxpr, x, producer) for x in (k, v)]
    if None in found or (rb, rc, vb, vc) != ((0, 2), (3,), (0, 2), (1,)):
        return None
    (k_cache, k_table), (v_cache, v_table) = found
    kshape, vshape = k_cache.aval.shape, v_cache.aval.shape
    packed = [8 * max(4 // np.dtype(c.aval.dtype).itemsize, 1) for c in (k_cache, v_cache)]  # a sublane tile
    if k_cache.aval.dtype != dtype or k_table.aval.shape != v_table.aval.shape or kshape[1:3] != vshape[1:3] \
            or any(kshape[1] % a for a in packed):
        return None
    size = _pages_per_block(k_table.aval.shape[1], kshape[1], kshape[2], max(kshape[3], vshape[3]),
                            max(np.dtype(c.aval.dtype).itemsize for c in (k_cache, v_cache)), query_rows)
    return None if size is None else found


def _per_item(x, axes, batch):
    """An int32 value along the scores' batch axes (``axes``: "b<i>" or None per dim) as one value per item of
    the kernel's batch (``batch``: its dims, the scores' batch dims in order), flattened."""
    keep = [d for d, a in enumerate(axes) if a is not None and x.shape[d] != 1]
    at = [int(axes[d][1:]) for d in keep]
    y = jnp.transpose(x.reshape([x.shape[d] for d in keep]), np.argsort(at))
    y = y.reshape([batch[i] if i in at else 1 for i in range(len(batch))])
    return jnp.broadcast_to(y, batch).reshape(-1).astype(jnp.int32)


def _pages_per_block(per_item, rows, heads, dim, itemsize, query_rows):
    """Pages a key block takes: the most that divide an item's pages and keep a step's keys, one page buffer
    and one head's f32 scores within their limits."""
    fits = [p for p in range(1, per_item + 1) if per_item % p == 0 and p * rows <= PAGED_BLOCK_KEYS
            and p * rows * heads * dim * itemsize <= PAGED_BUFFER_BYTES and query_rows * p * rows * 4 <= 8 << 20]
    return max(fits) if fits else None


def _paged_kernel(ktab_ref, vtab_ref, sc_ref, bv_ref, q_ref, kp_ref, vp_ref, o_ref, kbuf, vbuf, sems, m_ref, l_ref,
                  acc_ref, *, tail, step, per_item, n_scalars, n_batch):
    """One (batch item, key block) step: start the next block's page copies, wait for this one's, then per kv
    head the online softmax over its strided rows of the page buffer; the output at the last key block."""
    b, j, nj = pl.program_id(0), pl.program_id(1), pl.num_programs(1)
    n_pages, rows, heads, _ = kbuf.shape[1:]
    bk = n_pages * rows

    def copies(block, slot, read_table=True):
        for p in range(n_pages):
            at = b * per_item + block * n_pages + p
            kpage, vpage = (ktab_ref[at], vtab_ref[at]) if read_table else (0, 0)  # a wait needs only the size
            yield pltpu.make_async_copy(kp_ref.at[kpage], kbuf.at[slot, p], sems.at[0, slot])
            yield pltpu.make_async_copy(vp_ref.at[vpage], vbuf.at[slot, p], sems.at[1, slot])

    @pl.when(j == 0)
    def _first():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)
        for c in copies(0, 0):
            c.start()

    @pl.when(j + 1 < nj)
    def _prefetch():
        for c in copies(j + 1, (j + 1) % 2):
            c.start()

    slot = j % 2
    for c in copies(j, slot, read_table=False):
        c.wait()
    scalars = [sc_ref[t] for t in range(n_scalars)]
    for h in range(heads):
        item = (b * heads + h) * n_batch

        def load(h=h):
            return (q_ref[0, pl.ds(h, 1)], kbuf[slot, :, :, h, :].reshape(1, bk, kbuf.shape[-1]),
                    vbuf[slot, :, :, h, :].reshape(1, bk, vbuf.shape[-1]))

        step(load, m_ref.at[pl.ds(h, 1)], l_ref.at[pl.ds(h, 1)], acc_ref.at[pl.ds(h, 1)], row0=0, col0=j * bk,
             tail=functools.partial(tail, scalars=scalars + [bv_ref[item + t] for t in range(n_batch)]), n=None)

    @pl.when(j == nj - 1)
    def _store():
        o_ref[0] = (acc_ref[...] / l_ref[..., :1]).astype(o_ref.dtype)


def _paged_attention(q, k_cache, v_cache, k_table, v_table, *, tail, step, scalars, batch_values, n_batch,
                     out_dtype):
    """softmax(tail(q kᵀ)) v for q (B x H, M, D) whose keys and values are pages of ``(pages, rows, H, D)``
    caches listed by ``(B, pages per item, 1)`` tables; the result (B x H, M, E) as the flash kernel's."""
    n_items, per_item = k_table.shape[:2]
    _, rows, heads, d = k_cache.shape
    e, m = v_cache.shape[-1], q.shape[1]
    n_pages = _pages_per_block(per_item, rows, heads, max(d, e), k_cache.dtype.itemsize, m)
    tables = [jnp.clip(t.reshape(-1), 0, c.shape[0] - 1).astype(jnp.int32)  # the gather's clamp, not a fault
              for t, c in ((k_table, k_cache), (v_table, v_cache))]
    pad = [jnp.int32(0)]  # a prefetched array is never empty
    out = pl.pallas_call(
        functools.partial(_paged_kernel, tail=tail, step=step, per_item=per_item, n_scalars=len(scalars),
                          n_batch=n_batch),
        out_shape=jax.ShapeDtypeStruct((n_items, heads, m, e), out_dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4, grid=(n_items, per_item // n_pages),
            in_specs=[pl.BlockSpec((1, heads, m, d), lambda b, j, *_: (b, 0, 0, 0)),
                      pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((1, heads, m, e), lambda b, j, *_: (b, 0, 0, 0)),
            scratch_shapes=[pltpu.VMEM((2, n_pages, rows, heads, d), k_cache.dtype),
                            pltpu.VMEM((2, n_pages, rows, heads, e), v_cache.dtype),
                            pltpu.SemaphoreType.DMA((2, 2)),
                            pltpu.VMEM((heads, m, 128), jnp.float32), pltpu.VMEM((heads, m, 128), jnp.float32),
                            pltpu.VMEM((heads, m, e), jnp.float32)]),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"),
                                             vmem_limit_bytes=VMEM_LIMIT_BYTES),
    )(*tables, jnp.stack([*scalars, *pad]).astype(jnp.int32), jnp.concatenate([batch_values, *[p[None] for p in pad]]),
      q.reshape(n_items, heads, m, d), k_cache, v_cache)
    return out.reshape(n_items * heads, m, e)
