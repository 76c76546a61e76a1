"""A grouped matmul inside a staged program, copied verbatim into every staged candidate below the marker.

``out[r] = lhs[r] @ rhs[g]`` for the rows ``r`` of group ``g``: a mixture of
experts' tokens sorted by expert, each group a contiguous run of rows
(``[starts[g], starts[g] + rows[g])``, in order and disjoint, as the exclusive
cumulative sum of nonnegative group sizes makes them). Run group by group
(11p's ``scan``: 128 matmul kernels), every group's weights are sliced out and
copied by XLA before its kernel reads them, and each step pays the loop's
slicing and update ops. Here one kernel runs every group, as megablox does:
the rows are cut into tiles of ``GROUPED_ROWS``; a work item is one tile
with one group overlapping it (a tile that two groups share is visited once per
group, consecutively, so its output block stays in VMEM and accumulates; a tile
no group covers is visited once and written as zeros). The items are computed
in XLA from the starts and sizes and scalar-prefetched; grid ``(N blocks, items,
K blocks)``, the weights' block chosen by the item's group. An item's product
is masked to its group's rows before it is added. The item axis of the grid is
sized at run time (the number of items, megablox's active tiles), so no step is
spent past the last item.
"""

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from .matmul import VMEM_LIMIT_BYTES, _round_up, _sublane_tile, _tile

# --- the staged runtime (pasted into candidates from here on) ---
#: Rows per output tile (the MXU's 256 on v6e; a group of 256 rows aligned to them wastes nothing), the widest
#: N block, and the most one weights block (tk x tn of one group) may take in VMEM (two are buffered).
GROUPED_ROWS, GROUPED_COLUMNS, GROUPED_WEIGHT_BYTES = 256, 2048, 16 << 20


def _grouped_items(starts, rows, n_tiles, tm):
    """The number of work items and, tile-major, per item (tile, group, live, first visit of its tile, last visit,
    the group's rows relative to the tile as lo and hi): int32 arrays of the static length ``n_tiles + groups``,
    a bound; the entries past the real items repeat the last tile, not live. Groups with rows are taken to be in
    order and disjoint.
    Everything is a comparison of all pairs (items x groups at most): a few fused XLA ops, no loops or sorts."""
    g = starts.shape[0]
    tile_start = jnp.arange(n_tiles, dtype=jnp.int32)[:, None] * tm
    ends = jnp.minimum(starts + rows, n_tiles * tm)
    nonempty = (rows > 0) & (ends > starts)
    count = jnp.sum(nonempty & (starts < tile_start + tm) & (ends > tile_start), axis=1)  # groups on each tile
    visits = jnp.maximum(count, 1)
    through = jnp.cumsum(visits)
    w = jnp.arange(n_tiles + g, dtype=jnp.int32)
    tile = jnp.minimum(jnp.sum(through[None, :] <= w[:, None], axis=1), n_tiles - 1)
    visit = w - (through[tile] - visits[tile])
    done = jnp.sum(nonempty & (ends <= tile[:, None] * tm), axis=1)  # groups with rows ending before the tile
    rank = jnp.cumsum(nonempty) - 1  # a group's place among the groups with rows
    group = jnp.argmax(nonempty & (rank == (done + visit)[:, None]), axis=1)
    live = (w < through[-1]) & (count[tile] > 0)
    copied = group[lax.cummax(jnp.where(live, w, 0))]  # a dead item keeps the last live item's weights
    lo = starts[group] - tile * tm
    first = jnp.concatenate([jnp.ones(1, bool), tile[1:] != tile[:-1]])
    last = jnp.concatenate([tile[1:] != tile[:-1], jnp.ones(1, bool)]) | (w == through[-1] - 1)
    return through[-1], [a.astype(jnp.int32) for a in (tile, copied, live, first, last, lo, lo + rows[group])]


def _grouped_kernel(tile_ref, group_ref, live_ref, first_ref, last_ref, lo_ref, hi_ref, x_ref, w_ref, o_ref,
                    acc_ref):
    item, k = pl.program_id(1), pl.program_id(2)

    @pl.when((first_ref[item] == 1) & (k == 0))
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(live_ref[item] == 1)
    def _add():
        product = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)
        row = lax.broadcasted_iota(jnp.int32, product.shape, 0)
        acc_ref[...] += jnp.where((row >= lo_ref[item]) & (row < hi_ref[item]), product, 0.0)

    @pl.when((last_ref[item] == 1) & (k == pl.num_programs(2) - 1))
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def _grouped_blocks(m, k, n, itemsize):
    """(tm, padded M, tn, padded N, tk, padded K): rows in tiles of ``GROUPED_ROWS`` (fewer when M is smaller),
    N in blocks of up to ``GROUPED_COLUMNS``, then as much of K as keeps one weights block within
    ``GROUPED_WEIGHT_BYTES``. The planner's description asks the same."""
    tm = min(GROUPED_ROWS, _round_up(m, _sublane_tile(itemsize)))
    tn, np_ = _tile(n, GROUPED_COLUMNS, 128)
    target = max(GROUPED_WEIGHT_BYTES // (tn * itemsize) // 128 * 128, 128)
    tk, kp = _tile(k, target, 128)
    return tm, _round_up(m, tm), tn, np_, tk, kp


def _grouped_matmul(lhs, rhs, starts, rows, out_dtype):
    """(M, N): row r of group g (``starts[g] <= r < starts[g] + rows[g]``) is ``lhs[r] @ rhs[g]`` in f32, cast
    to ``out_dtype``; rows of no group are zero. lhs (M, K), rhs (G, K, N)."""
    m, k = lhs.shape
    g, _, n = rhs.shape
    dtype = jnp.promote_types(lhs.dtype, rhs.dtype)
    tm, mp, tn, np_, tk, kp = _grouped_blocks(m, k, n, dtype.itemsize)
    x, w = lhs.astype(dtype), rhs.astype(dtype)
    if (mp, kp) != (m, k):
        x = jnp.pad(x, ((0, mp - m), (0, kp - k)))
    if (kp, np_) != (k, n):
        w = jnp.pad(w, ((0, 0), (0, kp - k), (0, np_ - n)))
    n_tiles, nk = mp // tm, kp // tk
    count, items = _grouped_items(starts.astype(jnp.int32), jnp.maximum(rows, 0).astype(jnp.int32), n_tiles, tm)

    def at_k(kk, live, item):  # a dead item stays on the last K block: its blocks are the previous item's
        return jnp.where(live[item] == 1, kk, nk - 1)

    out = pl.pallas_call(
        _grouped_kernel,
        out_shape=jax.ShapeDtypeStruct((mp, np_), out_dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=len(items), grid=(np_ // tn, count, nk),  # as many steps as items: run-time
            in_specs=[pl.BlockSpec((tm, tk), lambda j, i, kk, t, gr, lv, *_: (t[i], at_k(kk, lv, i))),
                      pl.BlockSpec((None, tk, tn), lambda j, i, kk, t, gr, lv, *_: (gr[i], at_k(kk, lv, i), j))],
            out_specs=pl.BlockSpec((tm, tn), lambda j, i, kk, t, *_: (t[i], j)),
            scratch_shapes=[pltpu.VMEM((tm, tn), jnp.float32)]),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary", "arbitrary"),
                                             vmem_limit_bytes=VMEM_LIMIT_BYTES),
    )(*items, x, w)
    return out[:m, :n] if (mp, np_) != (m, n) else out


def _grouped_scan_on_kernel(plan, read, out_aval):
    """A ``_GroupedScan``'s result (staged_grouped_match.py): the scan's carry, or its first M rows when the
    plan took the slice of them."""
    sizes = read(plan.sizes).astype(jnp.int32)
    out = _grouped_matmul(read(plan.lhs), read(plan.rhs), jnp.cumsum(sizes) - sizes,
                          jnp.clip(sizes, 0, plan.window), out_aval.dtype)
    if plan.sliced is None and out_aval.shape[0] > out.shape[0]:  # rows no group window reaches: zeros
        out = jnp.pad(out, ((0, out_aval.shape[0] - out.shape[0]), (0, 0)))
    return out


def _ragged_dot_on_kernel(lhs, rhs, group_sizes, out_dtype):
    """``lax.ragged_dot`` (lhs (M, K), rhs (G, K, N), group sizes (G,)) on the grouped kernel."""
    sizes = group_sizes.astype(jnp.int32)
    starts = jnp.cumsum(sizes) - sizes
    return _grouped_matmul(lhs, rhs, starts, sizes, out_dtype)

