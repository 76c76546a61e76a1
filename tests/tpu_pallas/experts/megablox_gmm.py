"""Grouped matmul (11p) the megablox way: the row tiles each group touches are listed in XLA (a few small int
ops), scalar-prefetched, and walked by a grid whose middle axis is that list's length, known only at run time.
A tile shared by two groups is visited once per group; its rows outside the visited group are masked, and the
f32 accumulator carries across consecutive visits of the same tile, so each output tile is written once.

Grid (N / BLOCK_N, visits, K / BLOCK_K): the output block index stays put over a tile's visits and its K steps.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK_M, BLOCK_N, BLOCK_K = 512, 512, 1024
VMEM_LIMIT_BYTES = 64 * 1024 * 1024


def tile_visits(group_sizes, rows: int, block_m: int):
    """(group of each visit, row tile of each visit, group starts, group ends, number of visits); the arrays
    are sized for the most visits there can be (every tile once, plus one more per group boundary)."""
    groups = group_sizes.shape[0]
    ends = jnp.cumsum(group_sizes)
    starts = ends - group_sizes
    first = starts // block_m
    count = jnp.where(group_sizes > 0, (ends - 1) // block_m - first + 1, 0)  # tiles each group touches
    offsets = jnp.cumsum(count) - count
    bound = rows // block_m + groups - 1
    visit = jnp.arange(bound, dtype=jnp.int32)
    group = jnp.clip(jnp.searchsorted(jnp.cumsum(count), visit, side="right"), 0, groups - 1).astype(jnp.int32)
    tile = (first[group] + visit - offsets[group]).astype(jnp.int32)
    return group, jnp.clip(tile, 0, rows // block_m - 1), starts.astype(jnp.int32), ends.astype(jnp.int32), count.sum()


def _kernel(group_ref, tile_ref, start_ref, end_ref, lhs_ref, rhs_ref, o_ref, acc_ref, *, block_m):
    v, kk = pl.program_id(1), pl.program_id(2)
    tile, group = tile_ref[v], group_ref[v]
    first_visit = jnp.logical_or(v == 0, tile_ref[jnp.maximum(v - 1, 0)] != tile)
    last_visit = jnp.logical_or(v == pl.num_programs(1) - 1, tile_ref[jnp.minimum(v + 1, tile_ref.shape[0] - 1)] != tile)

    @pl.when(jnp.logical_and(kk == 0, first_visit))
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    rows = tile * block_m + jax.lax.broadcasted_iota(jnp.int32, (block_m, 1), 0)
    mine = jnp.logical_and(rows >= start_ref[group], rows < end_ref[group])
    product = jnp.dot(lhs_ref[...], rhs_ref[...], preferred_element_type=jnp.float32)
    acc_ref[...] += jnp.where(mine, product, 0.0)

    @pl.when(jnp.logical_and(kk == pl.num_programs(2) - 1, last_visit))
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def computation(lhs, rhs, group_sizes, max_group):
    m, k = lhs.shape
    n = rhs.shape[2]
    bm, bn, bk = min(BLOCK_M, m), min(BLOCK_N, n), min(BLOCK_K, k)
    group, tile, starts, ends, visits = tile_visits(group_sizes, m, bm)
    return pl.pallas_call(
        functools.partial(_kernel, block_m=bm),
        out_shape=jax.ShapeDtypeStruct((m, n), lhs.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4,
            grid=(n // bn, visits, k // bk),
            in_specs=[
                pl.BlockSpec((bm, bk), lambda j, v, kk, g, t, s, e: (t[v], kk)),
                pl.BlockSpec((None, bk, bn), lambda j, v, kk, g, t, s, e: (g[v], kk, j)),
            ],
            out_specs=pl.BlockSpec((bm, bn), lambda j, v, kk, g, t, s, e: (t[v], j)),
            scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        ),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary", "arbitrary"),
                                             vmem_limit_bytes=VMEM_LIMIT_BYTES),
    )(group, tile, starts, ends, lhs, rhs)
