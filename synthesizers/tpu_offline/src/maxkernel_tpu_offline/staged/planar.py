"""The staged template's few-channel convolution, copied verbatim into every staged candidate below the marker.

A stride-1 2-D convolution with fewer than 16 input channels (39k's and 46k's 8)
cannot use the direct kernel: its image, channels on the lanes, would be padded
16x in VMEM, and im2col writes ``taps x`` the input to HBM (39k: 1.8 ms of
patches). This kernel keeps each image channels first, ``(C, H, W)``, the width
on the lanes, and computes eight output rows per MXU product, channels first
too: ``weights (O, taps x C) @ patch (taps x C, 8 x W)``, the patch being the
taps' input rows (a sublane slice per row tap, a lane rotation per column tap,
in f32: Mosaic rotates 32-bit lanes). The product is lane-dense whatever C and O
are, the elementwise tail runs on it with per-channel operands as ``(O, 1)``
columns, and the image's output is stored NCHW: the transposes a reference
writes around an NHWC convolution of NCHW data (39k, 46k) cancel in XLA.
"""

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from .matmul import VMEM_LIMIT_BYTES, _round_up  # a candidate has them pasted above

# --- the staged runtime (pasted into candidates from here on) ---
#: Convolutions with fewer input channels than this run here (with more, the direct kernel's image is dense).
PLANAR_CHANNELS = 16
#: Output rows per MXU product: one f32 sublane tile, so that every row group starts on a tile.
PLANAR_ROWS = 8
#: A few-channel image is kept whole in VMEM (at most this many bytes of it), and so is its output, the
#: block double-buffered (at most this many bytes of both buffers).
PLANAR_IMAGE_BYTES = 16 << 20
PLANAR_OUT_BYTES = 24 << 20
#: ... and a row group's patch and f32 product take at most this many bytes each.
PLANAR_ACC_BYTES = 4 << 20


def _planar_geometry(spatial, c, window, o):
    """How the few-channel kernel runs a VALID convolution of a padded (H, W) input: the width it reads (a
    whole number of lane tiles: the columns past W are computed and dropped), the channels padded to a
    sublane tile (zero weights), K, the input rows a row group reads and the output extent."""
    (h, w), (kh, kw) = spatial, window
    width, cp = _round_up(w, 128), _round_up(c, 8)
    reads = _round_up(PLANAR_ROWS + kh - 1, 8)
    return {"h": h, "width": width, "cp": cp, "k": kh * kw * cp, "reads": reads, "oh": h - kh + 1,
            "ow": w - kw + 1, "groups": -(-(h - kh + 1) // PLANAR_ROWS)}


def _planar_conv_takes(spatial, c, window, o, item, out_item, reduces=False):
    """A 2-D convolution with fewer than 16 channels (more take the direct kernel), a row group's input rows
    at most two sublane tiles (a window at most 9 rows tall), and an image, output (unless the tail
    ``reduces`` it to per-channel sums) and row group that fit. (The planner asks this too, with the shapes
    it reads from the jaxpr.)"""
    if len(window) != 2 or c >= PLANAR_CHANNELS or window[0] > 9 or window[1] > spatial[1]:
        return False
    g = _planar_geometry(spatial, c, window, o)
    image = c * _round_up(g["h"], 32 // item) * g["width"] * item
    out = 0 if reduces else 2 * o * _round_up(g["oh"], 32 // out_item) * _round_up(g["ow"], 128) * out_item
    group = PLANAR_ROWS * g["width"] * 4 * max(o, g["k"])
    return image <= PLANAR_IMAGE_BYTES and out <= PLANAR_OUT_BYTES and group <= PLANAR_ACC_BYTES


def _planar_rows(x_ref, h0, g, c):
    """The input rows a row group starting at ``h0`` reads, (Cp, reads, width) in f32: zero rows past the
    image (only the last groups, whose ``h0`` is static, reach it) and zero channels up to Cp."""
    h, reads = x_ref.shape[2], g["reads"]
    if isinstance(h0, int) and h0 + reads > h:
        rows = x_ref[0, :, h0:h, :].astype(jnp.float32)
        rows = jnp.concatenate([rows, jnp.zeros((c, reads - (h - h0), rows.shape[-1]), jnp.float32)], axis=1)
    else:
        rows = x_ref[0, :, pl.ds(h0, reads), :].astype(jnp.float32)
    if g["cp"] > c:
        rows = jnp.concatenate([rows, jnp.zeros((g["cp"] - c, *rows.shape[1:]), jnp.float32)], axis=0)
    return rows


def _planar_product(x_ref, w_ref, h0, g, window):
    """The f32 product (O, PLANAR_ROWS x width) of the row group starting at ``h0``: the weights times the
    taps' input rows, each row tap a sublane slice of the window, each column tap a lane rotation of it."""
    v = _planar_rows(x_ref, h0, g, x_ref.shape[1])
    width, pieces = g["width"], []
    for i in range(window[0]):
        band = v[:, i:i + PLANAR_ROWS, :]
        for j in range(window[1]):  # column t + j onto column t: a lane rotation (the columns past W are dropped)
            shifted = pltpu.roll(band, width - j, 2) if j else band
            pieces.append(shifted.reshape(g["cp"], PLANAR_ROWS * width))
    patch = jnp.concatenate(pieces, axis=0).astype(x_ref.dtype)
    return jnp.dot(w_ref[...], patch, preferred_element_type=jnp.float32)


def _group_sum(tile, rows, ow):
    """Per-channel f32 sums (O, 1) of a row group's first ``rows`` rows and ``ow`` columns."""
    tile = tile.reshape(tile.shape[0], PLANAR_ROWS, -1)[:, :rows, :ow]
    return jnp.sum(tile.astype(jnp.float32), axis=(1, 2))[:, None]


def _planar_conv_kernel(x_ref, w_ref, *refs, geometry, window, tail):
    """One image: its output rows in groups of PLANAR_ROWS, each one product, the tail applied channels first,
    stored NCHW, or, when the tail ends in a spatial sum, summed per channel over the image. The groups whose
    rows lie inside the image run in a loop; the last ones (zero rows past the image) are unrolled."""
    *side_refs, out_ref = refs
    g, reduces = geometry, bool(tail and tail.reduces)

    def group(h0, rows, total):
        value = _planar_product(x_ref, w_ref, h0, g, window)
        if tail is not None:
            value = tail.fn(value.astype(tail.dot_dtype), [s[...] for s in side_refs], channels_first=lambda t: t,
                            spatial_sum=functools.partial(_group_sum, rows=rows, ow=g["ow"]))
        if reduces:
            return total + value
        value = value.reshape(value.shape[0], PLANAR_ROWS, g["width"])[:, :rows, :g["ow"]]
        out_ref[0, :, pl.ds(h0, rows), :] = value.astype(out_ref.dtype)
        return total

    total = jnp.zeros((w_ref.shape[0], 1), jnp.float32)
    looped = max(min(g["oh"] // PLANAR_ROWS, (g["h"] - g["reads"]) // PLANAR_ROWS + 1), 0)
    if looped:  # (a loop of no trips would still trace a read past a short image)
        total = lax.fori_loop(0, looped, lambda step, t: group(
            pl.multiple_of(step * PLANAR_ROWS, PLANAR_ROWS), PLANAR_ROWS, t), total)
    for step in range(looped, g["groups"]):
        total = group(step * PLANAR_ROWS, min(PLANAR_ROWS, g["oh"] - step * PLANAR_ROWS), total)
    if reduces:
        out_ref[0] = total.astype(out_ref.dtype)


def _planar_conv(x, w, out_dtype, tail=None):
    """VALID stride-1 2-D convolution of a padded (N, H, W, C) input with (KH, KW, C, O) weights, C < 16: the
    output (N, O, OH, OW), channels first, with the tail (if any) applied in the kernel; (N, O) when the tail
    ends in a spatial sum. Grid (image,)."""
    n, h, wd, c = x.shape
    kh, kw, _, o = w.shape
    g = _planar_geometry((h, wd), c, (kh, kw), o)
    image = jnp.transpose(x, (0, 3, 1, 2))  # undoes the reference's NCHW -> NHWC transpose: XLA drops both
    if g["width"] != wd:
        image = jnp.pad(image, [(0, 0), (0, 0), (0, 0), (0, g["width"] - wd)])
    weights = jnp.pad(w, [(0, 0), (0, 0), (0, g["cp"] - c), (0, 0)]) if g["cp"] > c else w
    weights = jnp.transpose(weights, (3, 0, 1, 2)).reshape(o, g["k"])  # (O, taps x Cp), tap-major like the patch
    sides = [s.reshape(o, 1) for s in tail.sides] if tail else []  # (1, O) lane vectors, (O, 1, 1) columns
    out = (o, 1) if tail and tail.reduces else (o, g["oh"], g["ow"])  # per-channel sums, or the image's output
    result = pl.pallas_call(
        functools.partial(_planar_conv_kernel, geometry=g, window=(kh, kw), tail=tail and tail.in_kernel()),
        out_shape=jax.ShapeDtypeStruct((n, *out), out_dtype),
        grid=(n,),
        in_specs=[pl.BlockSpec((1, c, h, g["width"]), lambda b: (b, 0, 0, 0)),
                  pl.BlockSpec((o, g["k"]), lambda b: (0, 0)),
                  *[pl.BlockSpec((o, 1), lambda b: (0, 0)) for _ in sides]],
        out_specs=pl.BlockSpec((1, *out), lambda b: (b,) + (0,) * len(out)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",), vmem_limit_bytes=VMEM_LIMIT_BYTES),
    )(image, weights, *sides)
    return result.reshape(n, o) if len(out) == 2 else result
