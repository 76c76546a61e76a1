"""The staged template's matmul kernel, copied verbatim into every staged candidate below the marker.

Every ``dot_general`` of the reference runs here as a batched (B, M, K) @ (B, K, N):
grid (B, M/bm, N/bn, K/bk), K innermost and "arbitrary", an f32 accumulator in
VMEM scratch, and the elementwise tail after the matmul (staged_epilogue.py)
applied in the store. Block sizes are re-derived from every matmul's own shapes
at call time; a dim with no aligned divisor under its block is zero-padded
(exact for a matmul).
"""

import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from .blocks import legal_block as _block  # noqa: F401 (a candidate gets it as its own _block)

# A candidate sets these at its top; the defaults serve tests that import this module.
BLOCK_M, BLOCK_N, BLOCK_K, VMEM_LIMIT_BYTES = 512, 512, 512, 64 << 20


# --- the staged runtime (pasted into candidates from here on) ---
# A grid step costs about 0.35 us however little it moves: a matmul whose K and N are one block each (im2col's
# taps x few channels) takes rows until a step moves this much.
STEP_BYTES = 4 << 20


def _rows_target(k, n, itemsize, block_m, block_k, block_n):
    """The M block to aim for: ``block_m``, or more rows when all of K and N fit one block (a power of two,
    so it still divides the usual extents). The planner's description asks the same with its point's blocks."""
    if k > block_k or n > block_n:
        return block_m
    rows = STEP_BYTES // ((k + n) * itemsize)
    return max(block_m, 1 << max(rows.bit_length() - 1, 0))


def _tile(n, target, align):
    """(block, padded extent): the largest aligned divisor of n up to target, else pad n to a multiple of
    an aligned block (a whole-dim block is legal too, but may not fit VMEM when n is large)."""
    block = _block(n, target, align)
    if block <= target or n <= align:
        return block, n
    block = max(min(target, n) // align * align, align)
    return block, -(-n // block) * block


def _matmul_kernel(x_ref, w_ref, *refs, tail=None):
    *side_refs, out_ref, acc_ref = refs

    @pl.when(pl.program_id(3) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[0], w_ref[0], preferred_element_type=acc_ref.dtype)

    @pl.when(pl.program_id(3) == pl.num_programs(3) - 1)
    def _store():
        out_ref[0] = _finish(acc_ref[...], [r[0] for r in side_refs], tail).astype(out_ref.dtype)


def _finish(acc, side_tiles, tail):
    """The accumulator as the matmul's own dtype, then the elementwise tail fused after it (if any)."""
    if tail is None:
        return acc
    fn, _, _, dot_dtype = tail
    return fn(acc.astype(dot_dtype), side_tiles)


def _pallas_matmul(x, w, out_dtype, tail=None):
    """(B, M, K) @ (B, K, N) -> (B, M, N): grid (B, M/bm, N/bn, K/bk), f32 accumulator in VMEM scratch,
    K innermost and 'arbitrary' so each output block stays resident while it accumulates. A tail's side
    operands come as (1, 1, N) lane vectors or (B, M, N) arrays, tiled as the output is."""
    b, m, k = x.shape
    n = w.shape[2]
    sub = 8 * max(4 // x.dtype.itemsize, 1)
    bm, mp = _tile(m, _rows_target(k, n, x.dtype.itemsize, BLOCK_M, BLOCK_K, BLOCK_N), sub)
    bn, np_ = _tile(n, BLOCK_N, 128)
    bk, kp = _tile(k, BLOCK_K, 128)
    if (mp, kp) != (m, k):
        x = jnp.pad(x, ((0, 0), (0, mp - m), (0, kp - k)))
    if (kp, np_) != (k, n):
        w = jnp.pad(w, ((0, 0), (0, kp - k), (0, np_ - n)))
    sides, side_specs = [], []
    for form, side in zip(*tail[1:3], strict=True) if tail else ():
        lane = form == "lane"
        sides.append(jnp.pad(side, ((0, 0), (0, 0 if lane else mp - m), (0, np_ - n))))
        side_specs.append(pl.BlockSpec((1, 1, bn), lambda g, i, j, kk: (0, 0, j)) if lane else
                          pl.BlockSpec((1, bm, bn), lambda g, i, j, kk: (g, i, j)))
    acc = jnp.int32 if jnp.issubdtype(out_dtype, jnp.integer) else jnp.float32
    out = pl.pallas_call(
        functools.partial(_matmul_kernel, tail=tail and (tail[0], None, None, tail[3])),
        out_shape=jax.ShapeDtypeStruct((b, mp, np_), out_dtype),
        grid=(b, mp // bm, np_ // bn, kp // bk),
        in_specs=[pl.BlockSpec((1, bm, bk), lambda g, i, j, kk: (g, i, kk)),
                  pl.BlockSpec((1, bk, bn), lambda g, i, j, kk: (g, kk, j)), *side_specs],
        out_specs=pl.BlockSpec((1, bm, bn), lambda g, i, j, kk: (g, i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), acc)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary"),
            vmem_limit_bytes=VMEM_LIMIT_BYTES),
    )(x, w, *sides)
    return out[:, :m, :n] if (mp, np_) != (m, n) else out


def _dot_general_on_kernel(lhs, rhs, *, dimension_numbers, out_dtype, tail=None):
    """Any dot_general as a batched (B, M, K) @ (B, K, N): its output layout is (batch, lhs free, rhs free).
    With a tail, ``out_dtype`` is the tail's result's."""
    (lc, rc), (lb, rb) = dimension_numbers
    lf = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rf = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    size = lambda a, dims: math.prod(a.shape[d] for d in dims)  # noqa: E731
    dtype = jnp.promote_types(lhs.dtype, rhs.dtype)
    x = jnp.transpose(lhs, (*lb, *lf, *lc)).reshape(size(lhs, lb), size(lhs, lf), size(lhs, lc)).astype(dtype)
    w = jnp.transpose(rhs, (*rb, *rc, *rf)).reshape(size(rhs, rb), size(rhs, rc), size(rhs, rf)).astype(dtype)
    if tail:  # lane vectors (1, N) and same-shaped operands, in the kernel's (B, M, N) layout
        bmn = (x.shape[0], x.shape[1], w.shape[2])
        sides = [s.reshape(1, 1, -1) if f == "lane" else s.reshape(bmn) for f, s in zip(*tail[1:3], strict=True)]
        tail = (tail[0], tail[1], sides, tail[3])
    out = _pallas_matmul(x, w, out_dtype, tail)
    return out.reshape(*(lhs.shape[d] for d in lb), *(lhs.shape[d] for d in lf), *(rhs.shape[d] for d in rf))
