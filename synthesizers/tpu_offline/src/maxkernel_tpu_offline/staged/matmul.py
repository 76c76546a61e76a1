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
import typing

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from ..blocks import legal_block as _block  # noqa: F401 (a candidate gets it as its own _block)

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


class _Tail(typing.NamedTuple):
    """An elementwise tail fused into a kernel's store (staged_epilogue.py): ``fn(tile, side_tiles)``, each side
    operand's form ("lane" or "full") and array, and the dtype the matmul or convolution itself produces (the
    accumulator is cast to it before ``fn``). A kernel gets it with ``forms`` and ``sides`` stripped: arrays
    reach a kernel as operands, never in its closure."""

    fn: typing.Any
    forms: typing.Any
    sides: typing.Any
    dot_dtype: typing.Any
    #: The tail transposes a convolution's NHWC output to NCHW (staged_epilogue._channels_first).
    channels_first: bool = False
    #: The tail ends in a sum over a 2-D convolution's spatial dims (staged_epilogue._spatial_sum).
    reduces: bool = False

    def in_kernel(self):
        return self._replace(forms=None, sides=None)

    def has_lanes(self):
        return "lane" in self.forms


def _sublane_tile(itemsize):
    """Rows of a VMEM tile for elements of ``itemsize`` bytes: 8 for 32-bit, 16 for bf16, 32 for 8-bit (the
    runtime's twin of blocks.sublane_align, which the planner uses)."""
    return 8 * max(4 // itemsize, 1)


def _round_up(n, tile):
    """``n`` rounded up to a whole number of ``tile``s (the padded extent of a dim in VMEM tiles)."""
    return -(-n // tile) * tile


def _tile(n, target, align):
    """(block, padded extent): the largest aligned divisor of n up to target, else pad n to a multiple of
    an aligned block (a whole-dim block is legal too, but may not fit VMEM when n is large)."""
    block = _block(n, target, align)
    if block <= target or n <= align:
        return block, n
    block = max(min(target, n) // align * align, align)
    return block, _round_up(n, block)


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
    return tail.fn(acc.astype(tail.dot_dtype), side_tiles)


def _pallas_matmul(x, w, out_dtype, tail=None):
    """(B, M, K) @ (B, K, N) -> (B, M, N): grid (B, M/bm, N/bn, K/bk), f32 accumulator in VMEM scratch,
    K innermost and 'arbitrary' so each output block stays resident while it accumulates. A tail's side
    operands come as (1, 1, N) lane vectors or (B, M, N) arrays, tiled as the output is."""
    b, m, k = x.shape
    n = w.shape[2]
    sub = _sublane_tile(x.dtype.itemsize)
    bm, mp = _tile(m, _rows_target(k, n, x.dtype.itemsize, BLOCK_M, BLOCK_K, BLOCK_N), sub)
    bn, np_ = _tile(n, BLOCK_N, 128)
    bk, kp = _tile(k, BLOCK_K, 128)
    if (mp, kp) != (m, k):
        x = jnp.pad(x, ((0, 0), (0, mp - m), (0, kp - k)))
    if (kp, np_) != (k, n):
        w = jnp.pad(w, ((0, 0), (0, kp - k), (0, np_ - n)))
    sides, side_specs = [], []
    for form, side in zip(tail.forms, tail.sides, strict=True) if tail else ():
        lane = form == "lane"
        sides.append(jnp.pad(side, ((0, 0), (0, 0 if lane else mp - m), (0, np_ - n))))
        side_specs.append(pl.BlockSpec((1, 1, bn), lambda g, i, j, kk: (0, 0, j)) if lane else
                          pl.BlockSpec((1, bm, bn), lambda g, i, j, kk: (g, i, j)))
    acc = jnp.int32 if jnp.issubdtype(out_dtype, jnp.integer) else jnp.float32
    bb = _batch_block(b, mp, kp, np_, bm, x.dtype.itemsize)
    if bb > 1:
        return _batched_matmul(x, w, out_dtype, tail, sides, bb, acc)[:, :m, :n]
    out = pl.pallas_call(
        functools.partial(_matmul_kernel, tail=tail and tail.in_kernel()),
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


def _batch_block(b, m, k, n, bm, item):
    """Batch items per step when each item's whole product is small (M one block, all of K and N within a
    step's bytes): grid steps of a few rows each (a decode's 8 query heads per kv head) are fixed cost."""
    per = (m * k + k * n + m * n) * item + m * n * 4
    if b == 1 or m != bm or per > STEP_BYTES:
        return 1
    return max(d for d in range(1, b + 1) if b % d == 0 and d * per <= STEP_BYTES)


def _batched_kernel(x_ref, w_ref, *refs, tail=None, acc=None):
    """bb whole products at once (no K loop: all of K is in the block), the tail in the store."""
    *side_refs, out_ref = refs
    prod = jnp.einsum("bmk,bkn->bmn", x_ref[...], w_ref[...], preferred_element_type=acc)
    out_ref[...] = _finish(prod, [r[...] for r in side_refs], tail).astype(out_ref.dtype)


def _batched_matmul(x, w, out_dtype, tail, sides, bb, acc):
    """(B, M, K) @ (B, K, N) as grid (B / bb,), bb items per step, each whole (see ``_batch_block``)."""
    b, m, k = x.shape
    n = w.shape[2]
    side_specs = [pl.BlockSpec((1, 1, n), lambda g: (0, 0, 0)) if f == "lane" else
                  pl.BlockSpec((bb, m, n), lambda g: (g, 0, 0)) for f in (tail.forms if tail else ())]
    return pl.pallas_call(
        functools.partial(_batched_kernel, tail=tail and tail.in_kernel(), acc=acc),
        out_shape=jax.ShapeDtypeStruct((b, m, n), out_dtype),
        grid=(b // bb,),
        in_specs=[pl.BlockSpec((bb, m, k), lambda g: (g, 0, 0)),
                  pl.BlockSpec((bb, k, n), lambda g: (g, 0, 0)), *side_specs],
        out_specs=pl.BlockSpec((bb, m, n), lambda g: (g, 0, 0)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",), vmem_limit_bytes=VMEM_LIMIT_BYTES),
    )(x, w, *sides)


def _dot_general_on_kernel(lhs, rhs, *, dimension_numbers, out_dtype, tail=None, fold=None):
    """Any dot_general as a batched (B, M, K) @ (B, K, N): its output layout is (batch, lhs free, rhs free).
    With a tail, ``out_dtype`` is the tail's result's. ``fold``: see ``_folded_dot``."""
    if fold is not None:
        return _folded_dot(lhs, rhs, dimension_numbers, out_dtype, tail, fold)
    (lc, rc), (lb, rb) = dimension_numbers
    lf, rf = _free_dims(lhs, lc, lb), _free_dims(rhs, rc, rb)
    if _swaps(lhs, rhs, dimension_numbers) and not (tail and tail.has_lanes()):
        nb, swapped = len(lb), (len(rf), len(lf))
        perm = (*range(nb), *range(nb + swapped[0], nb + sum(swapped)), *range(nb, nb + swapped[0]))
        out = _dot_general_on_kernel(rhs, lhs, dimension_numbers=((rc, lc), (rb, lb)), out_dtype=out_dtype,
                                     tail=_sides_to(tail, lambda s: jnp.transpose(s, _inverse(perm))))
        return jnp.transpose(out, perm)
    dtype = jnp.promote_types(lhs.dtype, rhs.dtype)
    x, w = _grouped(lhs, lb, lf, lc).astype(dtype), _grouped(rhs, rb, rc, rf).astype(dtype)
    if tail:  # lane vectors (1, N) and same-shaped operands, in the kernel's (B, M, N) layout
        bmn = (x.shape[0], x.shape[1], w.shape[2])
        tail = tail._replace(sides=[s.reshape(1, 1, -1) if f == "lane" else s.reshape(bmn)
                                    for f, s in zip(tail.forms, tail.sides, strict=True)])
    out = _pallas_matmul(x, w, out_dtype, tail)
    return out.reshape(*(lhs.shape[d] for d in lb), *(lhs.shape[d] for d in lf), *(rhs.shape[d] for d in rf))


def _free_dims(a, contracted, batch):
    """The dims of a dot_general operand (anything with a ``shape``) that are neither contracted nor batch."""
    return [d for d in range(len(a.shape)) if d not in contracted and d not in batch]


def _grouped(a, *groups):
    """``a`` transposed to its dim groups in order, each group merged into one dim: (B, M, K) from (batch,
    free, contracted), whatever the dot_general's own layout."""
    return jnp.transpose(a, [d for g in groups for d in g]).reshape(
        [math.prod(a.shape[d] for d in g) for g in groups])


def _swaps(lhs, rhs, dimension_numbers):
    """Whether to run the product with its operands swapped (and transpose it back): when its N is under 128
    and smaller than M, so its few columns would sit on the lanes (a decode's probabilities @ v: N = 1), and
    bringing the operands to the swapped layouts moves no more bytes than to the plain ones (16p's scores
    @ v, N = 64, would transpose a 2 GB operand to save lanes on a 64-wide one). Operands need only
    ``shape`` and ``dtype``: the planner asks with the jaxpr's avals."""
    (lc, rc), (lb, rb) = dimension_numbers
    lf, rf = _free_dims(lhs, lc, lb), _free_dims(rhs, rc, rb)
    m, n = (math.prod(a.shape[d] for d in dims) for a, dims in ((lhs, lf), (rhs, rf)))
    if not n < 128 or not m > n:
        return False
    plain = _moved(lhs, (*lb, *lf, *lc)) + _moved(rhs, (*rb, *rc, *rf))
    return _moved(rhs, (*rb, *rf, *rc)) + _moved(lhs, (*lb, *lc, *lf)) <= plain


def _moved(a, order):
    """The bytes a transpose to ``order`` moves: none when only size-1 axes change places."""
    kept = [d for d in order if a.shape[d] != 1]
    return 0 if kept == sorted(kept) else math.prod(a.shape) * jnp.dtype(a.dtype).itemsize


def _folded_dot(lhs, rhs, dimension_numbers, out_dtype, tail, fold):
    """A dot_general one of whose operands (``fold = (operand, axis, g)``) is given before a ``jnp.repeat`` of g
    along its batch dim ``axis`` (grouped-query attention's k and v, repeated over the query heads). The other
    operand's matching batch dim splits into (kept, g) and g joins its free dims: the kernel reads the operand
    once instead of g times, and takes g times the rows per step. The result is the reference's, reordered."""
    side, axis, g = fold
    (lc, rc), (lb, rb) = dimension_numbers
    ops, contracted, batch = [lhs, rhs], [list(lc), list(rc)], [list(lb), list(rb)]
    o = 1 - side
    if tail and tail.has_lanes() and o == 1:  # a lane vector over N would have to repeat too: no fold
        ops[side] = jnp.repeat(ops[side], g, axis=axis)
        return _dot_general_on_kernel(*ops, dimension_numbers=dimension_numbers, out_dtype=out_dtype, tail=tail)
    bpos = batch[side].index(axis)
    split = batch[o][bpos]
    other = ops[o]
    ops[o] = other.reshape(*other.shape[:split], other.shape[split] // g, g, *other.shape[split + 1:])
    contracted[o] = [d + (d > split) for d in contracted[o]]
    batch[o] = [d + (d > split) for d in batch[o]]
    free = [d for d in range(ops[o].ndim) if d not in contracted[o] and d not in batch[o]]
    lhs_free = ops[0].ndim - len(contracted[0]) - len(batch[0])
    g_at = len(lb) + (lhs_free if o == 1 else 0) + free.index(split + 1)
    shape = [other.shape[d] for d in (rb if o == 1 else lb)]  # the reference's output shape
    shape += [lhs.shape[d] for d in _free_dims(lhs, lc, lb)] + [rhs.shape[d] for d in _free_dims(rhs, rc, rb)]
    order = [d for d in range(len(shape) + 1) if d != g_at]
    order.insert(bpos + 1, g_at)  # the new output's axes in the order of the reference's, h as (h / g, g)
    split_shape = (*shape[:bpos], shape[bpos] // g, g, *shape[bpos + 1:])
    out = _dot_general_on_kernel(*ops, dimension_numbers=(tuple(contracted), tuple(batch)), out_dtype=out_dtype,
                                 tail=_sides_to(tail, lambda s: jnp.transpose(s.reshape(split_shape),
                                                                             _inverse(order))))
    return jnp.transpose(out, order).reshape(shape)


def _sides_to(tail, layout):
    """A tail with its full-shaped side operands brought to another output layout (lane vectors stay)."""
    if not tail:
        return tail
    return tail._replace(sides=[s if f == "lane" else layout(s) for f, s in zip(tail.forms, tail.sides, strict=True)])


def _inverse(perm):
    return tuple(sorted(range(len(perm)), key=lambda i: perm[i]))
