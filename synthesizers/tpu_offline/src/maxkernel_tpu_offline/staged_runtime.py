"""The runtime of the staged template, copied verbatim into every staged candidate below the marker.

The candidate runs the task's own reference program through a small jaxpr
interpreter that sends every ``dot_general`` to a tiled Pallas matmul kernel
and every ``conv_general_dilated`` to the same kernel after an im2col (the
convolution's windows gathered by pads and strided slices, which move data
and do no arithmetic). Everything else (bias adds, norms whose statistics
cross rows, softmaxes, top-k routing) is bound as the reference bound it, so
XLA fuses it around the kernels. Control flow (``scan``, ``while``, ``cond``)
is rebuilt with ``lax`` so the matmuls inside loop bodies reach the kernel too.

Block sizes are re-derived from every matmul's own shapes at call time; a dim
with no aligned divisor under its block is zero-padded (exact for a matmul).
"""

import functools
import itertools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from .blocks import legal_block as _block  # noqa: E402,F401 (a candidate gets it as its own _block)
from .staged_epilogue import _epilogue_plan, _flattened, _lane_vector, _tail_function  # noqa: E402 (pasted too)

# A candidate sets these at its top; the defaults serve tests that import this module.
BLOCK_M, BLOCK_N, BLOCK_K, VMEM_LIMIT_BYTES = 512, 512, 512, 64 << 20


# --- the staged runtime (pasted into candidates from here on) ---
#: im2col patches above this size are built for one block of the batch at a time (they would not fit HBM).
PATCH_BYTES = 1 << 30
_CALLS = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
         "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
         "remat": "jaxpr", "checkpoint": "jaxpr"}


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
    bm, mp = _tile(m, BLOCK_M, sub)
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


def _conv_on_kernel(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                    feature_group_count, out_dtype, tail=None):
    """A convolution in any layout, on the matmul kernel: brought to (N, spatial..., C) x (window..., C/G, O).
    A tail (whose side operands are (1, O) lane vectors) is fused into the direct kernel and the one-group
    im2col matmul, and applied after the others."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    nsp = len(lhs_spec) - 2
    x = jnp.transpose(lhs, (lhs_spec[0], *lhs_spec[2:], lhs_spec[1]))
    w = jnp.transpose(rhs, (*rhs_spec[2:], rhs_spec[1], rhs_spec[0]))
    dtype = jnp.promote_types(x.dtype, w.dtype)
    x, w = x.astype(dtype), w.astype(dtype)
    fused = tail
    if any(d > 1 for d in lhs_dilation) and all(s == 1 for s in window_strides) and all(r == 1 for r in rhs_dilation):
        fused = None
        out = _transposed_conv(x, w, padding, lhs_dilation, feature_group_count, tail[3] if tail else out_dtype)
    else:
        zero = jnp.zeros((), x.dtype)  # dilation (of a transposed convolution) is interior padding
        x = lax.pad(x, zero, [(0, 0, 0), *[(lo, hi, d - 1) for (lo, hi), d in zip(padding, lhs_dilation, strict=False)], (0, 0, 0)])
        plain = all(s == 1 for s in window_strides) and all(r == 1 for r in rhs_dilation) and feature_group_count == 1
        if plain and _direct_conv_fits(x, w):
            out = _direct_conv(x, w, out_dtype, tail)
        else:
            fused = tail if feature_group_count == 1 else None
            out = _im2col_conv(x, w, window_strides, rhs_dilation, feature_group_count,
                               out_dtype if fused else (tail[3] if tail else out_dtype), fused)
    if tail and not fused:
        out = _finish(out, tail[2], tail).astype(out_dtype)
    # out_spec says where batch, feature and each spatial dim sit in the result.
    order = [0, nsp + 1, *range(1, nsp + 1)]
    return jnp.transpose(out, [order[list(out_spec).index(d)] for d in range(nsp + 2)])


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
    g = _direct_geometry(spatial, c, window, 1, item)
    return c >= 16 and g["planes"] * spatial[-2] * _sublane_width(g["width"]) * -(-c // 128) * 128 * item <= \
        DIRECT_IMAGE_BYTES


def _sublane_width(width):
    """A width as a whole number of sublane tiles (16 rows, bf16's tile)."""
    return -(-width // 16) * 16


def _direct_geometry(spatial, c, window, o, item):
    """How the direct kernel runs a VALID convolution of a padded ([D,] H, W) input: ``width`` it reads
    (zero columns added past W if needed), ``shifted``: whether it reads whole rows and shifts each column
    tap's product on the f32 side (when W is a whole number of sublane tiles: no padding) or reads each
    tap's window at its column (no shifts, all taps in one product), the rows per grid step and K."""
    planes = window[0] if len(window) == 3 else 1
    (h, w), (kh, kw) = spatial[-2:], window[-2:]
    oh, ow = h - kh + 1, w - kw + 1
    shifted = w % 16 == 0 or _sublane_width(w) < _sublane_width(ow) + kw - 1
    width = _sublane_width(w) if shifted else _sublane_width(ow) + kw - 1
    row = _sublane_width(w) if shifted else _sublane_width(ow)  # output columns computed per row
    k = planes * kh * c * (1 if shifted else kw)
    lanes = lambda n: -(-n // 128) * 128  # noqa: E731
    fits = lambda d: d * row * max(lanes(o) * 4, lanes(k) * item) <= DIRECT_ACC_BYTES  # noqa: E731
    rows = max(d for d in range(1, oh + 1) if oh % d == 0 and (fits(d) or d == 1))
    return {"planes": planes, "oh": oh, "ow": ow, "width": width, "row": row, "shifted": shifted, "rows": rows,
            "k": k, "dots": kw if shifted else 1}


def _direct_conv_kernel(*refs, planes, bh, ow, row, window, shifted, tail):
    """One block of output rows. The input rows each tap reads sit side by side along the lanes (a patch of
    (rows, taps x C), built in VMEM) and go through the MXU at once; with ``shifted``, the column taps are
    separate products, each rotated j columns (a sublane rotate) onto the output columns they belong to."""
    x_refs, (w_ref, *side_refs, out_ref) = refs[:planes], refs[planes:]
    r = pl.program_id(len(window) - 1)  # the row-block axis is the grid's last: (image, [plane,] rows)
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
    out_ref[0] = _finish(acc[:, :ow, :], [s[...] for s in side_refs], tail).astype(out_ref.dtype)


def _direct_conv(x, w, out_dtype, tail=None):
    """VALID stride-1 convolution of a padded (N, [D,] H, W, C) input with ([KD,] KH, KW, C, O) weights: grid
    (image, [output plane,] block of output rows). A 2-D image stays in VMEM across its row blocks; a 3-D
    input comes as the KD planes an output plane reads (one operand per depth tap, indexed d + dz); the
    weights, as (products, taps x C, O), stay across the whole grid."""
    n, *spatial, c = x.shape
    *window, _, o = w.shape
    g = _direct_geometry(spatial, c, window, o, x.dtype.itemsize)
    planes, h, bh = g["planes"], spatial[-2], g["rows"]
    oh, ow, width = g["oh"], g["ow"], g["width"]
    x = jnp.pad(x, [(0, 0)] * (x.ndim - 2) + [(0, width - spatial[-1]), (0, 0)])  # extra columns: dropped outputs
    w = w.reshape(planes, window[-2], window[-1], c, o)
    w = (jnp.transpose(w, (2, 0, 1, 3, 4)) if g["shifted"] else w[None]).reshape(g["dots"], g["k"], o)
    sides = list(tail[2]) if tail else []
    fixed = lambda *grid: (0, 0)  # noqa: E731
    if planes == 1:
        grid, out_shape = (n, oh // bh), (n, oh, ow, o)
        x_specs = [pl.BlockSpec((1, h, width, c), lambda b, r: (b, 0, 0, 0))]
        out_spec = pl.BlockSpec((1, bh, ow, o), lambda b, r: (b, r, 0, 0))
    else:
        od = spatial[0] - planes + 1
        grid, out_shape = (n, od, oh // bh), (n, od, oh, ow, o)
        x_specs = [pl.BlockSpec((1, pl.Squeezed(), h, width, c), lambda b, d, r, dz=dz: (b, d + dz, 0, 0, 0))
                   for dz in range(planes)]
        out_spec = pl.BlockSpec((1, pl.Squeezed(), bh, ow, o), lambda b, d, r: (b, d, r, 0, 0))
    return pl.pallas_call(
        functools.partial(_direct_conv_kernel, planes=planes, bh=bh, ow=ow, row=g["row"], window=tuple(window),
                          shifted=g["shifted"], tail=tail and (tail[0], None, None, tail[3])),
        out_shape=jax.ShapeDtypeStruct(out_shape, out_dtype),
        grid=grid,
        in_specs=[*x_specs, pl.BlockSpec(w.shape, lambda *grid: (0, 0, 0)),
                  *[pl.BlockSpec((1, o), fixed) for _ in sides]],
        out_specs=out_spec,
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
    taps = []
    for tap in itertools.product(*[range(k) for k in window]):
        start = [0, *[t * r for t, r in zip(tap, rhs_dilation, strict=False)], 0]
        limit = [x.shape[0], *[s + (o - 1) * st + 1 for s, o, st in zip(start[1:], out_sp, strides, strict=False)], x.shape[-1]]
        taps.append(lax.slice(x, start, limit, (1, *strides, 1)))
    c, o = x.shape[-1], w.shape[-1]
    positions, t = n * math.prod(out_sp), len(taps)
    # Concatenated along channels, not stacked on a new axis: a (..., taps, C) array with a small C would be
    # padded to 128 lanes in HBM (4x the bytes for C = 32).
    patches = jnp.concatenate(taps, axis=-1).reshape(positions, t, groups, c // groups)
    patches = jnp.transpose(patches, (2, 0, 1, 3)).reshape(groups, positions, t * (c // groups))
    weights = w.reshape(t, c // groups, groups, o // groups)
    weights = jnp.transpose(weights, (2, 0, 1, 3)).reshape(groups, t * (c // groups), o // groups)
    if tail:  # one group (the caller's rule): the (1, O) lane vectors are the kernel's (1, 1, N)
        tail = (tail[0], tail[1], [side.reshape(1, 1, -1) for side in tail[2]], tail[3])
    out = _pallas_matmul(patches, weights, out_dtype, tail)  # G, positions, O/G
    return jnp.transpose(out, (1, 0, 2)).reshape(n, *out_sp, o)


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


def _run_with_kernels(jaxpr, consts, args):
    """Evaluate a jaxpr, sending its matmuls and convolutions to the Pallas kernel, each with the elementwise
    tail after it fused in (staged_epilogue.py): the kernel runs where its tail ends."""
    env = {}

    def read(v):
        return v.val if type(v).__name__ == "Literal" else env[v]

    jaxpr, consts = _flattened(jaxpr, consts, args)
    env.update(zip(jaxpr.constvars, consts, strict=False))
    env.update(zip(jaxpr.invars, args, strict=False))
    plans = _epilogue_plan(jaxpr)
    deferred = {j for i, tail, _ in plans.values() for j in (i, *tail)} - set(plans)
    for index, eqn in enumerate(jaxpr.eqns):
        if index in deferred:
            continue
        if index in plans:
            outs = [_kernel_with_tail(jaxpr, plans[index], read)]
        else:
            outs = _bind_on_kernels(eqn, [read(v) for v in eqn.invars], eqn.outvars[0].aval.dtype)
        env.update(zip(eqn.outvars, outs, strict=False))
    return [read(v) for v in jaxpr.outvars]


def _kernel_with_tail(jaxpr, plan, read):
    """The matmul or convolution of a plan with its tail in the kernel's store; the result is the tail's."""
    i, tail, sides = plan
    eqn = jaxpr.eqns[i]
    shape = eqn.outvars[0].aval.shape
    values = [_lane_vector(read(src), dims, eqn) if form == "lane" else jnp.broadcast_to(read(v), shape)
              for v, (form, src, dims) in sides.items()]
    spec = (_tail_function(jaxpr, i, tail, list(sides)), [form for form, _, _ in sides.values()], values,
            eqn.outvars[0].aval.dtype)
    return _bind_on_kernels(eqn, [read(v) for v in eqn.invars], jaxpr.eqns[tail[-1]].outvars[0].aval.dtype,
                            spec)[0]


def _bind_on_kernels(eqn, ins, out_dtype, tail=None):
    """One equation's outputs, its matmuls and convolutions on the kernels (and loops' bodies through them)."""
    p, name = eqn.params, eqn.primitive.name
    if name == "dot_general":
        return [_dot_general_on_kernel(*ins, dimension_numbers=p["dimension_numbers"], out_dtype=out_dtype,
                                       tail=tail)]
    if name == "conv_general_dilated":
        return [_conv_on_kernel(*ins, window_strides=p["window_strides"], padding=p["padding"],
                                lhs_dilation=p["lhs_dilation"], rhs_dilation=p["rhs_dilation"],
                                dimension_numbers=p["dimension_numbers"],
                                feature_group_count=p["feature_group_count"], out_dtype=out_dtype, tail=tail)]
    if name in _CALLS and _CALLS[name] in p:
        sub = p[_CALLS[name]]
        inner, inner_consts = (sub.jaxpr, sub.consts) if hasattr(sub, "jaxpr") else (sub, ())
        return _run_with_kernels(inner, inner_consts, ins)
    if name == "scan":
        return _scan_on_kernels(p, ins)
    if name == "while":
        return _while_on_kernels(p, ins)
    if name == "cond":
        branches = [lambda *a, b=b: _run_with_kernels(b.jaxpr, b.consts, a) for b in p["branches"]]
        return lax.switch(ins[0], branches, *ins[1:])
    params = eqn.primitive.get_bind_params(p)
    subfuns, params = params if isinstance(params, tuple) else ((), params)  # older JAX: (subfuns, params)
    outs = eqn.primitive.bind(*subfuns, *ins, **params)
    return outs if eqn.primitive.multiple_results else [outs]


def _scan_on_kernels(p, ins):
    body, nc, ncarry = p["jaxpr"], p["num_consts"], p["num_carry"]
    consts, carry, xs = ins[:nc], ins[nc:nc + ncarry], ins[nc + ncarry:]

    def step(carry, x):
        outs = _run_with_kernels(body.jaxpr, body.consts, [*consts, *carry, *x])
        return outs[:ncarry], outs[ncarry:]

    carry, ys = lax.scan(step, carry, xs, length=p["length"], reverse=p["reverse"], unroll=p["unroll"])
    return [*carry, *ys]


def _while_on_kernels(p, ins):
    cj, bj, cn, bn = p["cond_jaxpr"], p["body_jaxpr"], p["cond_nconsts"], p["body_nconsts"]
    cconsts, bconsts, init = ins[:cn], ins[cn:cn + bn], ins[cn + bn:]
    out = lax.while_loop(lambda c: _run_with_kernels(cj.jaxpr, cj.consts, [*cconsts, *c])[0],
                         lambda c: _run_with_kernels(bj.jaxpr, bj.consts, [*bconsts, *c]), init)
    return list(out)


def _with_kernels(fn, n_dynamic):
    """``fn`` (the reference) with its matmuls and convolutions on Pallas kernels."""

    def run(*args):
        dynamic, static = args[:n_dynamic], args[n_dynamic:]
        closed = jax.make_jaxpr(lambda *d: fn(*d, *static))(*dynamic)
        outs = _run_with_kernels(closed.jaxpr, closed.consts, list(dynamic))
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(jax.eval_shape(
            lambda *d: fn(*d, *static), *dynamic)), outs)

    return run
