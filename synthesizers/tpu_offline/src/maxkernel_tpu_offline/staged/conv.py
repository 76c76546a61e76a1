"""The staged template's convolutions, copied verbatim into every staged candidate below the marker.

A stride-1 2-D convolution with fewer channels runs on the few-channel kernel
(staged_planar.py). A stride-1 2-D or 3-D convolution with at least 16 channels runs on the direct
kernel (the taps' input rows side by side in VMEM, one MXU product per column
tap or for all taps; no patches in HBM). A 2-D one whose NHWC output the
reference transposes to NCHW has the transpose in its tail: the direct kernel
stores its tiles channels first, and XLA makes no transposing copy. Every other convolution becomes im2col
patches (strided slices concatenated along the channels: data movement, no
arithmetic) and the matmul kernel, one matmul per feature group; a transposed
convolution (input dilation) runs as one dense convolution per output residue
class, without the dilation's zeros.
"""

import functools
import itertools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from .matmul import VMEM_LIMIT_BYTES, _finish, _pallas_matmul, _round_up  # a candidate has them pasted above
from .planar import PLANAR_CHANNELS, _planar_conv, _planar_conv_takes

# --- the staged runtime (pasted into candidates from here on) ---
#: im2col patches above this size are built for one block of the batch at a time (they would not fit HBM).
PATCH_BYTES = 4 << 30


def _conv_on_kernel(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                    feature_group_count, out_dtype, tail=None):
    """A convolution in any layout, on the matmul kernel: brought to (N, spatial..., C) x (window..., C/G, O).
    A tail (whose side operands are (1, O) lane vectors, and (O, 1, 1) columns after a channels-first
    transpose) is fused into the few-channel and direct kernels and the one-group im2col matmul, and applied
    after the others; one that ends in a spatial sum makes the result (N, O)."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    nsp = len(lhs_spec) - 2
    x = jnp.transpose(lhs, (lhs_spec[0], *lhs_spec[2:], lhs_spec[1]))
    w = jnp.transpose(rhs, (*rhs_spec[2:], rhs_spec[1], rhs_spec[0]))
    dtype = jnp.promote_types(x.dtype, w.dtype)
    x, w = x.astype(dtype), w.astype(dtype)
    kernel_dtype = tail.dot_dtype if tail else out_dtype  # what the kernels write when the tail runs after them
    if any(d > 1 for d in lhs_dilation) and all(s == 1 for s in window_strides) and all(r == 1 for r in rhs_dilation):
        fused, out = None, _transposed_conv(x, w, padding, lhs_dilation, feature_group_count, kernel_dtype)
    else:
        zero = jnp.zeros((), x.dtype)  # dilation (of a transposed convolution) is interior padding
        x = lax.pad(x, zero, [(0, 0, 0), *[(lo, hi, d - 1) for (lo, hi), d in zip(padding, lhs_dilation, strict=False)], (0, 0, 0)])
        fused, out = _dense_conv(x, w, window_strides, rhs_dilation, feature_group_count, out_dtype, tail)
    if tail and not fused:
        out = _finish(out, tail.sides, tail).astype(out_dtype)
    if tail and tail.reduces:
        return out  # (N, C): the tail's spatial sum of an NHWC output (staged_epilogue._spatial_sum)
    # out_spec says where batch, feature and each spatial dim sit in the result.
    order = [0, nsp + 1, *range(1, nsp + 1)]
    return jnp.transpose(out, [order[list(out_spec).index(d)] for d in range(nsp + 2)])


def _dense_conv(x, w, strides, rhs_dilation, groups, out_dtype, tail):
    """(the tail fused into the kernel or None, the output) of a VALID convolution of a padded input: on the
    few-channel or the direct kernel where one takes it, else im2col. im2col's matmul stores (positions, O)
    tiles, so a channels-first tail runs after it, as it does after a direct kernel that cannot store channels
    first; only the few-channel kernel writes a tail's spatial sum."""
    kernel_dtype = tail.dot_dtype if tail else out_dtype
    plain = all(s == 1 for s in strides) and all(r == 1 for r in rhs_dilation) and groups == 1
    first, reduces = bool(tail and tail.channels_first), bool(tail and tail.reduces)
    if plain and x.ndim == 4 and _planar_conv_takes(x.shape[1:3], x.shape[3], w.shape[:2], w.shape[-1],
                                                    x.dtype.itemsize, jnp.dtype(out_dtype).itemsize, reduces):
        out = _planar_conv(x, w, out_dtype, tail)  # NCHW (or (N, O) sums), the whole tail applied, in its dtype
        return tail, out if first or reduces else jnp.transpose(out, (0, 2, 3, 1))
    if plain and _direct_conv_fits(x, w):
        fused = tail if not reduces and (not first or _channels_first_fits(x, w, out_dtype)) else None
        return fused, _direct_conv(x, w, out_dtype if fused else kernel_dtype, fused)
    fused = tail if groups == 1 and not first and not reduces else None
    return fused, _im2col_conv(x, w, strides, rhs_dilation, groups, out_dtype if fused else kernel_dtype, fused)


#: A direct convolution keeps its input planes whole in VMEM, double-buffered: at most this many bytes of them.
DIRECT_IMAGE_BYTES = 16 << 20
#: ... and builds, per block of output rows, a patch (taps x channels wide) and an f32 product of at most this
#: many bytes each.
DIRECT_ACC_BYTES = 4 << 20


def _direct_conv_fits(x, w):
    """Whether the direct kernel takes this VALID 2-D or 3-D convolution of a padded (N, [D,] H, W, C) input."""
    if x.ndim not in (4, 5):
        return False
    return _direct_conv_takes(x.shape[1:-1], x.shape[-1], w.shape[:-2], x.dtype.itemsize)


def _direct_conv_takes(spatial, c, window, item):
    """At least 16 channels (fewer, e.g. 8, pad each VMEM row of the image 16x to 128 lanes) and input planes that
    fit. Small check sizes and full sizes of one task take the same path when their channels agree. (The planner
    asks this too, with the shapes it reads from the jaxpr.)"""
    planes, (_, width, _) = (window[0] if len(window) == 3 else 1), _direct_read(spatial[-1], window[-1])
    return c >= PLANAR_CHANNELS and planes * spatial[-2] * _sublane_width(width) * _round_up(c, 128) * item <= DIRECT_IMAGE_BYTES


#: A direct convolution storing channels first keeps each image's output whole in VMEM: an f32 scratch it fills
#: row block by row block and the output block (double-buffered); at most this many bytes of them.
CHANNELS_FIRST_BYTES = 24 << 20


def _channels_first_fits(x, w, out_dtype):
    """Whether the direct kernel can store this convolution's output channels first (NCHW)."""
    return _channels_first_takes(x.shape[1:-1], x.shape[-1], w.shape[:-2], w.shape[-1], x.dtype.itemsize,
                                 jnp.dtype(out_dtype).itemsize)


def _channels_first_takes(spatial, c, window, o, item, out_item):
    """A 2-D convolution whose output rows are at most one lane tile wide (128 columns computed per row: Mosaic
    stores a row block's transposed tile at any row offset only then), and whose scratch and output block fit.
    (The planner asks this too.)"""
    if len(window) != 2:
        return False
    g = _direct_geometry(spatial, c, window, o, item)
    scratch = o * _round_up(g["oh"], 8) * 128 * 4
    block = o * _round_up(g["oh"], 32 // out_item) * _round_up(g["ow"], 128) * out_item
    return g["row"] <= 128 and scratch + 2 * block <= CHANNELS_FIRST_BYTES


def _sublane_width(width):
    """A width as a whole number of sublane tiles (16 rows, bf16's tile)."""
    return _round_up(width, 16)


def _direct_read(w, kw):
    """(shifted, the width read, output columns computed per row) for rows W wide and KW column taps: whole rows,
    each column tap's product shifted on the f32 side, when W is a whole number of sublane tiles (no padding)
    or padding it is the smaller; else each tap's window read at its column (all taps in one product)."""
    ow = w - kw + 1
    shifted = w % 16 == 0 or _sublane_width(w) < _sublane_width(ow) + kw - 1
    if shifted:
        return True, _sublane_width(w), _sublane_width(w)
    return False, _sublane_width(ow) + kw - 1, _sublane_width(ow)


def _direct_geometry(spatial, c, window, o, item):
    """How the direct kernel runs a VALID convolution of a padded ([D,] H, W) input: ``width`` it reads
    (zero columns added past W if needed), ``shifted``: whether it reads whole rows and shifts each column
    tap's product on the f32 side (when W is a whole number of sublane tiles: no padding) or reads each
    tap's window at its column (no shifts, all taps in one product), the rows per grid step and K."""
    planes = window[0] if len(window) == 3 else 1
    (h, w), (kh, kw) = spatial[-2:], window[-2:]
    oh, ow = h - kh + 1, w - kw + 1
    shifted, width, row = _direct_read(w, kw)
    k = planes * kh * c * (1 if shifted else kw)
    fits = lambda d: d * row * max(_round_up(o, 128) * 4, _round_up(k, 128) * item) <= DIRECT_ACC_BYTES  # noqa: E731
    rows = max(d for d in range(1, oh + 1) if oh % d == 0 and (fits(d) or d == 1))
    return {"planes": planes, "oh": oh, "ow": ow, "width": width, "row": row, "shifted": shifted, "rows": rows,
            "k": k, "dots": kw if shifted else 1}


def _direct_conv_kernel(*refs, planes, bh, ow, row, window, shifted, tail):
    """One block of output rows. The input rows each tap reads sit side by side along the lanes (a patch of
    (rows, taps x C), built in VMEM) and go through the MXU at once; with ``shifted``, the column taps are
    separate products, each rotated j columns (a sublane rotate) onto the output columns they belong to.
    A channels-first tail transposes each row block's tile to (C, rows, columns) into an f32 scratch holding
    the image's output, stored (NCHW) after its last row block."""
    channels_first = bool(tail and tail.channels_first)
    x_refs, rest = refs[:planes], refs[planes:]
    *rest, scratch = rest if channels_first else (*rest, None)
    w_ref, *side_refs, out_ref = rest
    axis = len(window) - 1  # the row-block axis is the grid's last: (image, [plane,] rows)
    r = pl.program_id(axis)
    kh, kw = window[-2:]
    c = x_refs[0].shape[-1]
    columns = [None] if shifted else range(kw)
    pieces = [x[0, pl.ds(r * bh + i, bh), pl.ds(0 if j is None else j, row), :].reshape(bh * row, c)
              for x in x_refs for i in range(kh) for j in columns]
    patch = jnp.concatenate(pieces, axis=-1) if len(pieces) > 1 else pieces[0]
    acc = None
    for j in range(w_ref.shape[0]):
        z = jnp.dot(patch, w_ref[j], preferred_element_type=jnp.float32).reshape(bh, row, w_ref.shape[-1])
        z = pltpu.roll(z, row - j, 1) if j else z  # column t + j lands on column t
        acc = z if acc is None else acc + z
    sides = [s[...] for s in side_refs]
    if not channels_first:
        out_ref[0] = _finish(acc[:, :ow, :], sides, tail).astype(out_ref.dtype)
        return

    def to_channels_first(tile):  # (rows, columns, C) -> (C, rows, columns), transposed in f32
        o = tile.shape[-1]
        return tile.astype(jnp.float32).reshape(bh * row, o).T.reshape(o, bh, row).astype(tile.dtype)

    value = tail.fn(acc.astype(tail.dot_dtype), sides, channels_first=to_channels_first)
    scratch[:, pl.ds(r * bh, bh), :] = value.astype(jnp.float32)

    @pl.when(r == pl.num_programs(axis) - 1)
    def _store():
        out_ref[0] = scratch[:, :, :ow].astype(out_ref.dtype)


def _direct_conv(x, w, out_dtype, tail=None):
    """VALID stride-1 convolution of a padded (N, [D,] H, W, C) input with ([KD,] KH, KW, C, O) weights: grid
    (image, [output plane,] block of output rows). A 2-D image stays in VMEM across its row blocks; a 3-D
    input comes as the KD planes an output plane reads (one operand per depth tap, indexed d + dz); the
    weights, as (products, taps x C, O), stay across the whole grid. A channels-first tail makes the output
    (N, O, OH, OW), one block per image."""
    n, *spatial, c = x.shape
    *window, _, o = w.shape
    g = _direct_geometry(spatial, c, window, o, x.dtype.itemsize)
    planes, h, bh = g["planes"], spatial[-2], g["rows"]
    oh, ow, width = g["oh"], g["ow"], g["width"]
    x = jnp.pad(x, [(0, 0)] * (x.ndim - 2) + [(0, width - spatial[-1]), (0, 0)])  # extra columns: dropped outputs
    w = w.reshape(planes, window[-2], window[-1], c, o)
    w = (jnp.transpose(w, (2, 0, 1, 3, 4)) if g["shifted"] else w[None]).reshape(g["dots"], g["k"], o)
    sides = list(tail.sides) if tail else []
    channels_first = bool(tail and tail.channels_first)
    scratch = [pltpu.VMEM((o, oh, g["row"]), jnp.float32)] if channels_first else []
    if planes == 1:
        grid = (n, oh // bh)
        x_specs = [pl.BlockSpec((1, h, width, c), lambda b, r: (b, 0, 0, 0))]
        out_shape, out_spec = (n, oh, ow, o), pl.BlockSpec((1, bh, ow, o), lambda b, r: (b, r, 0, 0))
        if channels_first:
            out_shape, out_spec = (n, o, oh, ow), pl.BlockSpec((1, o, oh, ow), lambda b, r: (b, 0, 0, 0))
    else:
        od = spatial[0] - planes + 1
        grid, out_shape = (n, od, oh // bh), (n, od, oh, ow, o)
        x_specs = [pl.BlockSpec((1, pl.Squeezed(), h, width, c), lambda b, d, r, dz=dz: (b, d + dz, 0, 0, 0))
                   for dz in range(planes)]
        out_spec = pl.BlockSpec((1, pl.Squeezed(), bh, ow, o), lambda b, d, r: (b, d, r, 0, 0))
    side_specs = [pl.BlockSpec(s.shape, lambda *grid, rank=s.ndim: (0,) * rank) for s in sides]  # (1, O) or (O, 1, 1)
    return pl.pallas_call(
        functools.partial(_direct_conv_kernel, planes=planes, bh=bh, ow=ow, row=g["row"], window=tuple(window),
                          shifted=g["shifted"], tail=tail and tail.in_kernel()),
        out_shape=jax.ShapeDtypeStruct(out_shape, out_dtype),
        grid=grid,
        in_specs=[*x_specs, pl.BlockSpec(w.shape, lambda *grid: (0, 0, 0)), *side_specs],
        out_specs=out_spec,
        scratch_shapes=scratch,
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",) * (len(grid) - 1) + ("arbitrary",),
                                             vmem_limit_bytes=VMEM_LIMIT_BYTES),
    )(*[x] * planes, w, *sides)


def _im2col_conv(x, w, strides, rhs_dilation, groups, out_dtype, tail=None):
    """VALID convolution of a padded (N, spatial..., C) input: one matmul per feature group over the patches
    (N * output positions, taps * C/G); the patches are strided slices, stacked (data movement only)."""
    nsp = x.ndim - 2
    window = w.shape[:nsp]
    out_sp = [(x.shape[1 + i] - (window[i] - 1) * rhs_dilation[i] - 1) // strides[i] + 1 for i in range(nsp)]
    n = x.shape[0]
    patch_bytes = n * math.prod(out_sp) * math.prod(window) * x.shape[-1] * x.dtype.itemsize
    chunks = next((d for d in range(1, n + 1) if n % d == 0 and patch_bytes // d <= PATCH_BYTES), n)
    if chunks > 1:  # bound the patches in HBM: one block of the batch at a time
        parts = lax.map(lambda xc: _im2col_conv(xc, w, strides, rhs_dilation, groups, out_dtype, tail),
                        x.reshape(chunks, n // chunks, *x.shape[1:]))
        return parts.reshape(n, *parts.shape[2:])
    # Patches and outputs are computed for a width rounded up to the sublane tile (zero columns past W), so
    # that (N, ..., W, ·) <-> (positions, ·) are views, not relayouts of every patch and every output.
    width = out_sp[-1]
    out_sp = [*out_sp[:-1], _sublane_width(width)]
    extra = (out_sp[-1] - width) * strides[-1]
    x = jnp.pad(x, [(0, 0)] * (x.ndim - 2) + [(0, extra), (0, 0)]) if extra else x
    taps = []
    for tap in itertools.product(*[range(k) for k in window]):
        start = [0, *[t * r for t, r in zip(tap, rhs_dilation, strict=False)], 0]
        limit = [x.shape[0], *[s + (o - 1) * st + 1 for s, o, st in zip(start[1:], out_sp, strides, strict=False)], x.shape[-1]]
        taps.append(lax.slice(x, start, limit, (1, *strides, 1)))
    c, o = x.shape[-1], w.shape[-1]
    positions, t = n * math.prod(out_sp), len(taps)
    # Concatenated along channels, not stacked on a new axis: a (..., taps, C) array with a small C would be
    # padded to 128 lanes in HBM (4x the bytes for C = 32).
    patches = jnp.concatenate(taps, axis=-1)
    if groups == 1:  # no (..., taps, C) view at all: with a small C, XLA lays it out padded to 128 lanes
        patches, weights = patches.reshape(1, positions, t * c), w.reshape(1, t * c, o)
    else:
        patches = jnp.transpose(patches.reshape(positions, t, groups, c // groups), (2, 0, 1, 3))
        patches = patches.reshape(groups, positions, t * (c // groups))
        weights = jnp.transpose(w.reshape(t, c // groups, groups, o // groups), (2, 0, 1, 3))
        weights = weights.reshape(groups, t * (c // groups), o // groups)
    if tail:  # one group (the caller's rule): the (1, O) lane vectors are the kernel's (1, 1, N)
        tail = tail._replace(sides=[side.reshape(1, 1, -1) for side in tail.sides])
    out = _pallas_matmul(patches, weights, out_dtype, tail)  # G, positions, O/G
    return jnp.transpose(out, (1, 0, 2)).reshape(n, *out_sp, o)[..., :width, :]


def _transposed_conv(x, w, padding, dilation, groups, out_dtype):
    """A stride-1 convolution of an input dilated by s (a transposed convolution), without the zeros: the
    outputs at positions r (mod s) meet only the taps t0(r), t0(r) + s, ... of the window, so each of the
    prod(s) residue classes is a dense convolution of the undilated input with a sub-window (1/s of the
    taps per dim), and the classes interleave into the output. im2col of the dilated input would spend
    (1 - 1/s) of its FLOPs and of its patch memory on zeros."""
    nsp = x.ndim - 2
    window = w.shape[:nsp]
    out_sp = [p[0] + (x.shape[1 + i] - 1) * dilation[i] + 1 + p[1] - window[i] + 1 for i, p in enumerate(padding)]
    parts = []  # (output index of the class, its outputs), residues in lexicographic order
    for residues in itertools.product(*[range(min(s, o)) for s, o in zip(dilation, out_sp, strict=False)]):
        crop, taps, index = [(0, 0, 0)], [], [slice(None)]
        for i, r in enumerate(residues):
            s, lo, k, n = dilation[i], padding[i][0], window[i], x.shape[1 + i]
            t0 = (lo - r) % s
            count, q = -(-(out_sp[i] - r) // s), len(range(t0, k, s))
            c = (r + t0 - lo) // s  # the input index the first output of this class meets first
            crop.append((-c, c + count + q - 1 - n, 0))  # negative padding crops
            taps.append(slice(t0, k, s))
            index.append(slice(r, None, s))
        if any(t.start >= k for t, k in zip(taps, window, strict=False)):
            continue  # no tap lands on an input element: these outputs stay zero
        part = lax.pad(x, jnp.zeros((), x.dtype), [*crop, (0, 0, 0)])
        parts.append((index, _im2col_conv(part, w[tuple(taps)], (1,) * nsp, (1,) * nsp, groups, out_dtype)))
    shape = (x.shape[0], *out_sp, w.shape[-1])
    if len(parts) == math.prod(dilation) and all(o % s == 0 for o, s in zip(out_sp, dilation, strict=False)):
        # Every class has the same extent: interleave by a reshape (no scatter, no zero-filled copies).
        stacked = jnp.stack([cls for _, cls in parts]).reshape(*dilation, *parts[0][1].shape)
        perm = [nsp, *[a for i in range(nsp) for a in (nsp + 1 + i, i)], 2 * nsp + 1]
        return jnp.transpose(stacked, perm).reshape(shape)
    out = jnp.zeros(shape, out_dtype)
    for index, cls in parts:
        out = out.at[(*index, slice(None))].set(cls)
    return out
