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
query group on the rows. A table may list one item's pages (7p unrolls its
sequences), and k and v may be every other head of one cache (7p's k at the
even heads of a page, v at the odd): they then share the copies. No block is
skipped: what the tail masks (the keys past a sequence's length) is computed
and weighs nothing, as in the reference.
"""

import functools
import math
import typing

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from .attention_match import _producers
from .matmul import VMEM_LIMIT_BYTES, _sublane_tile

# --- the staged runtime (pasted into candidates from here on) ---
#: Keys per step (pages x rows), and the most one page buffer (one of k, v; one of two slots) may hold.
PAGED_BLOCK_KEYS, PAGED_BUFFER_BYTES = 1024, 4 << 20


class _Pages(typing.NamedTuple):
    """Keys or values read as pages of a cache: ``cache[table]`` (vars), heads ``head0, head0 + stride, ...``
    of the cache's heads (a k/v-interleaved cache's 0::2 and 1::2)."""

    cache: typing.Any
    table: typing.Any
    head0: int
    stride: int


def _paged_source(jaxpr, v, producer):
    """``v`` as ``_Pages`` when it is ``cache[table]`` (a gather of whole pages along the cache's first axis by
    a ``(*batch, pages per item, 1)`` int32 table), optionally sliced to every stride-th head, reshaped so
    that the page axis and the page rows are one key axis: ``(*batch, pages x rows, heads, dim)``; else None."""
    def made_by(x, name):
        e = jaxpr.eqns[producer[x]] if x in producer else None
        return e if e is not None and e.primitive.name == name else None

    reshape = made_by(v, "reshape")
    if reshape is None or reshape.params.get("dimensions") is not None:
        return None
    x, head0, stride = reshape.invars[0], 0, 1
    sliced = made_by(x, "slice")
    if sliced is not None:
        shape, start = sliced.invars[0].aval.shape, sliced.params["start_indices"]
        strides = sliced.params["strides"] or (1,) * len(shape)
        others = [d for d in range(len(shape)) if d != len(shape) - 2]
        if any(start[d] or sliced.params["limit_indices"][d] != shape[d] or strides[d] != 1 for d in others):
            return None
        x, head0, stride = sliced.invars[0], start[-2], strides[-2]
    gather = made_by(x, "gather")
    if gather is None:
        return None
    cache, table = gather.invars
    pages, index, dn = cache.aval.shape, table.aval.shape, gather.params["dimension_numbers"]
    whole_pages = (tuple(dn.collapsed_slice_dims) == (0,) and tuple(dn.start_index_map) == (0,)
                   and not tuple(dn.operand_batching_dims) and tuple(gather.params["slice_sizes"]) == (1, *pages[1:])
                   and tuple(dn.offset_dims) == tuple(range(len(index) - 1, len(index) + len(pages) - 2)))
    if not whole_pages or len(index) not in (2, 3) or index[-1] != 1 or len(pages) != 4 \
            or table.aval.dtype != np.int32:
        return None
    heads = reshape.invars[0].aval.shape[-2]
    merged = (*index[:-2], index[-2] * pages[1], heads, pages[3])
    return _Pages(cache, table, head0, stride) if tuple(v.aval.shape) == merged else None


def _copied(kp, vp):
    """The ``_Pages`` the kernel copies: k's alone when v is read from the same cache by the same table."""
    return [kp] if kp.cache is vp.cache and kp.table is vp.table else [kp, vp]


def _paged_sources(jaxpr, k, v, dims, dtype, query_rows):
    """(k's ``_Pages``, v's, pages per key block) when k and v are both pages of caches (``_paged_source``)
    listed by tables of one shape, their batch and heads the products' batch dims (``dims``: the scores' k
    batch and contracting dims, the output's v batch and contracting dims), k's cache already of the product's
    dtype, the page rows whole sublane tiles, and a key block fits (``_pages_per_block``); else None."""
    producer = _producers(jaxpr)
    found = [_paged_source(jaxpr, x, producer) for x in (k, v)]
    if None in found:
        return None
    kp, vp = found
    lead = len(kp.table.aval.shape) - 2
    batch = (*range(lead), lead + 1)
    if tuple(tuple(x) for x in dims) != (batch, (lead + 2,), batch, (lead,)) or kp.cache.aval.dtype != dtype \
            or kp.table.aval.shape != vp.table.aval.shape or k.aval.shape[:-1] != v.aval.shape[:-1]:
        return None
    caches = [x.cache.aval for x in _copied(kp, vp)]
    rows = {c.shape[1] for c in caches}
    if len(rows) != 1 or any(c.shape[1] % _sublane_tile(np.dtype(c.dtype).itemsize) for c in caches):
        return None
    page_bytes = max(math.prod(c.shape[1:]) * np.dtype(c.dtype).itemsize for c in caches)
    size = _pages_per_block(kp.table.aval.shape[-2], rows.pop(), page_bytes, query_rows)
    return None if size is None else (kp, vp, size)


def _per_item(x, axes, batch):
    """An int32 value along the scores' batch axes (``axes``: "b<i>" or None per dim) as one value per item of
    the kernel's batch (``batch``: its dims, the scores' batch dims in order), flattened."""
    keep = [d for d, a in enumerate(axes) if a is not None and x.shape[d] != 1]
    at = [int(axes[d][1:]) for d in keep]
    y = jnp.transpose(x.reshape([x.shape[d] for d in keep]), np.argsort(at))
    y = y.reshape([batch[i] if i in at else 1 for i in range(len(batch))])
    return jnp.broadcast_to(y, batch).reshape(-1).astype(jnp.int32)


def _pages_per_block(per_item, rows, page_bytes, query_rows):
    """Pages a key block takes: the most that divide an item's pages and keep a step's keys, one page buffer
    and one head's f32 scores within their limits."""
    fits = [p for p in range(1, per_item + 1) if per_item % p == 0 and p * rows <= PAGED_BLOCK_KEYS
            and p * page_bytes <= PAGED_BUFFER_BYTES and query_rows * p * rows * 4 <= 8 << 20]
    return max(fits) if fits else None


def _paged_kernel(*refs, tail, step, per_item, n_caches, k_heads, v_heads, n_scalars, n_batch):
    """One (batch item, key block) step: start the next block's page copies, wait for this one's, then per kv
    head the online softmax over its strided rows of the page buffer (k from the first cache's buffer, v from
    the last: one buffer when k and v share a cache); the output at the last key block."""
    tables, (sc_ref, bv_ref, q_ref), caches = refs[:n_caches], refs[n_caches:n_caches + 3], refs[n_caches + 3:][:n_caches]
    o_ref, bufs, (sems, m_ref, l_ref, acc_ref) = refs[2 * n_caches + 3], refs[2 * n_caches + 4:][:n_caches], refs[-4:]
    b, j, nj = pl.program_id(0), pl.program_id(1), pl.num_programs(1)
    n_pages, rows = bufs[0].shape[1:3]
    bk = n_pages * rows

    def copies(block, slot, read_table=True):
        for p in range(n_pages):
            at = b * per_item + block * n_pages + p
            for c in range(n_caches):
                page = tables[c][at] if read_table else 0  # a wait needs only the copy's size
                yield pltpu.make_async_copy(caches[c].at[page], bufs[c].at[slot, p], sems.at[c, slot])

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
    for h, (kh, vh) in enumerate(zip(k_heads, v_heads, strict=True)):
        item = (b * len(k_heads) + h) * n_batch

        def load(h=h, kh=kh, vh=vh):
            return (q_ref[0, pl.ds(h, 1)], bufs[0][slot, :, :, kh, :].reshape(1, bk, bufs[0].shape[-1]),
                    bufs[-1][slot, :, :, vh, :].reshape(1, bk, bufs[-1].shape[-1]))

        step(load, m_ref.at[pl.ds(h, 1)], l_ref.at[pl.ds(h, 1)], acc_ref.at[pl.ds(h, 1)], row0=0, col0=j * bk,
             tail=functools.partial(tail, scalars=scalars + [bv_ref[item + t] for t in range(n_batch)]), n=None)

    @pl.when(j == nj - 1)
    def _store():
        o_ref[0] = (acc_ref[...] / l_ref[..., :1]).astype(o_ref.dtype)


def _paged_attention(q, pages, read, *, tail, step, scalars, batch_values, n_batch, out_dtype):
    """softmax(tail(q kᵀ)) v for q (items x H, M, D) whose keys and values are the ``_Pages`` of ``pages`` (k's,
    v's, and the pages per key block: ``_paged_sources``; ``read`` gives a var's value); the result
    (items x H, M, E) as the flash kernel's."""
    kp, vp, n_pages = pages
    sources = _copied(kp, vp)
    caches = [read(x.cache) for x in sources]
    table = read(kp.table)
    per_item, n_items = table.shape[-2], math.prod(table.shape[:-2])
    heads, m, d, e = q.shape[0] // n_items, q.shape[1], q.shape[2], caches[-1].shape[-1]
    tables = [jnp.clip(read(x.table).reshape(-1), 0, c.shape[0] - 1).astype(jnp.int32)  # the gather's clamp
              for x, c in zip(sources, caches, strict=True)]
    pad = jnp.zeros((1,), jnp.int32)  # a prefetched array is never empty
    out = pl.pallas_call(
        functools.partial(_paged_kernel, tail=tail, step=step, per_item=per_item, n_caches=len(caches),
                          k_heads=[kp.head0 + h * kp.stride for h in range(heads)],
                          v_heads=[vp.head0 + h * vp.stride for h in range(heads)], n_scalars=len(scalars),
                          n_batch=n_batch),
        out_shape=jax.ShapeDtypeStruct((n_items, heads, m, e), out_dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=len(caches) + 2, grid=(n_items, per_item // n_pages),
            in_specs=[pl.BlockSpec((1, heads, m, d), lambda b, j, *_: (b, 0, 0, 0))]
            + [pl.BlockSpec(memory_space=pl.ANY)] * len(caches),
            out_specs=pl.BlockSpec((1, heads, m, e), lambda b, j, *_: (b, 0, 0, 0)),
            scratch_shapes=[pltpu.VMEM((2, n_pages, *c.shape[1:]), c.dtype) for c in caches]
            + [pltpu.SemaphoreType.DMA((len(caches), 2)), pltpu.VMEM((heads, m, 128), jnp.float32),
               pltpu.VMEM((heads, m, 128), jnp.float32), pltpu.VMEM((heads, m, e), jnp.float32)]),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"),
                                             vmem_limit_bytes=VMEM_LIMIT_BYTES),
    )(*tables, jnp.stack([*scalars, pad[0]]).astype(jnp.int32),
      jnp.concatenate([batch_values, pad]), q.reshape(n_items, heads, m, d), *caches)
    return out.reshape(n_items * heads, m, e)
