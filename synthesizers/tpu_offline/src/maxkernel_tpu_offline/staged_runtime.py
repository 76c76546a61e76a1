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


def _matmul_kernel(x_ref, w_ref, out_ref, acc_ref):
    @pl.when(pl.program_id(3) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[0], w_ref[0], preferred_element_type=acc_ref.dtype)

    @pl.when(pl.program_id(3) == pl.num_programs(3) - 1)
    def _store():
        out_ref[0] = acc_ref[...].astype(out_ref.dtype)


def _pallas_matmul(x, w, out_dtype):
    """(B, M, K) @ (B, K, N) -> (B, M, N): grid (B, M/bm, N/bn, K/bk), f32 accumulator in VMEM scratch,
    K innermost and 'arbitrary' so each output block stays resident while it accumulates."""
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
    acc = jnp.int32 if jnp.issubdtype(out_dtype, jnp.integer) else jnp.float32
    out = pl.pallas_call(
        _matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((b, mp, np_), out_dtype),
        grid=(b, mp // bm, np_ // bn, kp // bk),
        in_specs=[pl.BlockSpec((1, bm, bk), lambda g, i, j, kk: (g, i, kk)),
                  pl.BlockSpec((1, bk, bn), lambda g, i, j, kk: (g, kk, j))],
        out_specs=pl.BlockSpec((1, bm, bn), lambda g, i, j, kk: (g, i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), acc)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary"),
            vmem_limit_bytes=VMEM_LIMIT_BYTES),
    )(x, w)
    return out[:, :m, :n] if (mp, np_) != (m, n) else out


def _dot_general_on_kernel(lhs, rhs, *, dimension_numbers, out_dtype):
    """Any dot_general as a batched (B, M, K) @ (B, K, N): its output layout is (batch, lhs free, rhs free)."""
    (lc, rc), (lb, rb) = dimension_numbers
    lf = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rf = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    size = lambda a, dims: math.prod(a.shape[d] for d in dims)  # noqa: E731
    dtype = jnp.promote_types(lhs.dtype, rhs.dtype)
    x = jnp.transpose(lhs, (*lb, *lf, *lc)).reshape(size(lhs, lb), size(lhs, lf), size(lhs, lc)).astype(dtype)
    w = jnp.transpose(rhs, (*rb, *rc, *rf)).reshape(size(rhs, rb), size(rhs, rc), size(rhs, rf)).astype(dtype)
    out = _pallas_matmul(x, w, out_dtype)
    return out.reshape(*(lhs.shape[d] for d in lb), *(lhs.shape[d] for d in lf), *(rhs.shape[d] for d in rf))


def _conv_on_kernel(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                    feature_group_count, out_dtype):
    """A convolution in any layout, on the matmul kernel: brought to (N, spatial..., C) x (window..., C/G, O)."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    nsp = len(lhs_spec) - 2
    x = jnp.transpose(lhs, (lhs_spec[0], *lhs_spec[2:], lhs_spec[1]))
    w = jnp.transpose(rhs, (*rhs_spec[2:], rhs_spec[1], rhs_spec[0]))
    dtype = jnp.promote_types(x.dtype, w.dtype)
    x, w = x.astype(dtype), w.astype(dtype)
    if any(d > 1 for d in lhs_dilation) and all(s == 1 for s in window_strides) and all(r == 1 for r in rhs_dilation):
        out = _transposed_conv(x, w, padding, lhs_dilation, feature_group_count, out_dtype)
    else:
        zero = jnp.zeros((), x.dtype)  # dilation (of a transposed convolution) is interior padding
        x = lax.pad(x, zero, [(0, 0, 0), *[(lo, hi, d - 1) for (lo, hi), d in zip(padding, lhs_dilation, strict=False)], (0, 0, 0)])
        plain = all(s == 1 for s in window_strides) and all(r == 1 for r in rhs_dilation) and feature_group_count == 1
        if plain and nsp == 2 and _direct_conv_fits(x, w):
            out = _direct_conv(x, w, out_dtype)
        else:
            out = _im2col_conv(x, w, window_strides, rhs_dilation, feature_group_count, out_dtype)
    # out_spec says where batch, feature and each spatial dim sit in the result.
    order = [0, nsp + 1, *range(1, nsp + 1)]
    return jnp.transpose(out, [order[list(out_spec).index(d)] for d in range(nsp + 2)])


#: A direct convolution keeps one whole (padded) image in VMEM, double-buffered: at most this many bytes of it.
DIRECT_IMAGE_BYTES = 16 << 20
#: ... and accumulates a block of output rows in f32 of at most this many bytes.
DIRECT_ACC_BYTES = 4 << 20


def _direct_conv_fits(x, w):
    """Whether the direct kernel takes this VALID 2-D convolution of a padded (N, H, W, C) image."""
    n, h, width, c = x.shape
    return _direct_conv_takes(h, width, c, x.dtype.itemsize)


def _direct_conv_takes(h, width, c, item):
    """At least 16 channels (fewer, e.g. 8, leave 15/16 of every lane and of the MXU's K empty: im2col's taps x
    channels fills them) and an image that fits. Small check sizes and full sizes of one task take the same path
    when their channels agree. (The planner asks this too, with the shapes it reads from the jaxpr.)"""
    lanes = -(-c // 128) * 128
    return c >= 16 and h * _sublane_width(width) * lanes * item <= DIRECT_IMAGE_BYTES


def _sublane_width(width):
    """The image width the direct kernel works at: a whole number of sublane tiles (16 rows, bf16's tile)."""
    return -(-width // 16) * 16


def _direct_rows(oh, width, o):
    """Output rows per grid step: the most that divide OH with an f32 accumulator within DIRECT_ACC_BYTES."""
    row_bytes = _sublane_width(width) * -(-o // 128) * 128 * 4
    return max(d for d in range(1, oh + 1) if oh % d == 0 and (d * row_bytes <= DIRECT_ACC_BYTES or d == 1))


def _direct_conv_kernel(x_ref, w_ref, out_ref, *, bh, width, ow):
    """One block of output rows: for each tap (i, j), the image rows it reads times W[i, j] on the MXU, and the
    product shifted j columns left (a sublane rotate) into the f32 accumulator: no patches, in HBM or VMEM."""
    r = pl.program_id(1)
    taps_h, taps_w, c, o = w_ref.shape
    acc = jnp.zeros((bh, width, o), jnp.float32)
    for i in range(taps_h):
        rows = x_ref[0, pl.ds(r * bh + i, bh)].reshape(bh * width, c)
        for j in range(taps_w):
            z = jnp.dot(rows, w_ref[i, j], preferred_element_type=jnp.float32).reshape(bh, width, o)
            acc += z if j == 0 else pltpu.roll(z, width - j, 1)  # column t + j lands on column t
    out_ref[0] = acc[:, :ow, :].astype(out_ref.dtype)


def _direct_conv(x, w, out_dtype):
    """VALID stride-1 2-D convolution of a padded (N, H, W, C) input with (KH, KW, C, O) weights: grid (image,
    block of output rows); the image stays in VMEM across its row blocks, the weights across the whole grid."""
    n, h, width, c = x.shape
    taps_h, taps_w, _, o = w.shape
    oh, ow = h - taps_h + 1, width - taps_w + 1
    padded = _sublane_width(width)  # the rows reshape without a relayout
    if padded != width:  # extra zero columns only feed output columns past ow, which are dropped
        x = jnp.pad(x, ((0, 0), (0, 0), (0, padded - width), (0, 0)))
    bh = _direct_rows(oh, width, o)
    return pl.pallas_call(
        functools.partial(_direct_conv_kernel, bh=bh, width=padded, ow=ow),
        out_shape=jax.ShapeDtypeStruct((n, oh, ow, o), out_dtype),
        grid=(n, oh // bh),
        in_specs=[pl.BlockSpec((1, h, padded, c), lambda b, r: (b, 0, 0, 0)),
                  pl.BlockSpec((taps_h, taps_w, c, o), lambda b, r: (0, 0, 0, 0))],
        out_specs=pl.BlockSpec((1, bh, ow, o), lambda b, r: (b, r, 0, 0)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"),
                                             vmem_limit_bytes=VMEM_LIMIT_BYTES),
    )(x, w)


def _im2col_conv(x, w, strides, rhs_dilation, groups, out_dtype):
    """VALID convolution of a padded (N, spatial..., C) input: one matmul per feature group over the patches
    (N * output positions, taps * C/G); the patches are strided slices, stacked (data movement only)."""
    nsp = x.ndim - 2
    window = w.shape[:nsp]
    out_sp = [(x.shape[1 + i] - (window[i] - 1) * rhs_dilation[i] - 1) // strides[i] + 1 for i in range(nsp)]
    n = x.shape[0]
    patch_bytes = n * math.prod(out_sp) * math.prod(window) * x.shape[-1] * x.dtype.itemsize
    chunks = next((d for d in range(1, n + 1) if n % d == 0 and patch_bytes // d <= PATCH_BYTES), n)
    if chunks > 1:  # bound the patches in HBM: one block of the batch at a time
        parts = lax.map(lambda xc: _im2col_conv(xc, w, strides, rhs_dilation, groups, out_dtype),
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
    out = _pallas_matmul(patches, weights, out_dtype)  # G, positions, O/G
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
    """Evaluate a jaxpr, sending its matmuls and convolutions to the Pallas kernel."""
    env = {}

    def read(v):
        return v.val if type(v).__name__ == "Literal" else env[v]

    env.update(zip(jaxpr.constvars, consts, strict=False))
    env.update(zip(jaxpr.invars, args, strict=False))
    for eqn in jaxpr.eqns:
        ins, p, name = [read(v) for v in eqn.invars], eqn.params, eqn.primitive.name
        out_dtype = eqn.outvars[0].aval.dtype
        if name == "dot_general":
            outs = [_dot_general_on_kernel(*ins, dimension_numbers=p["dimension_numbers"], out_dtype=out_dtype)]
        elif name == "conv_general_dilated":
            outs = [_conv_on_kernel(*ins, window_strides=p["window_strides"], padding=p["padding"],
                         lhs_dilation=p["lhs_dilation"], rhs_dilation=p["rhs_dilation"],
                         dimension_numbers=p["dimension_numbers"], feature_group_count=p["feature_group_count"],
                         out_dtype=out_dtype)]
        elif name in _CALLS and _CALLS[name] in p:
            sub = p[_CALLS[name]]
            inner, inner_consts = (sub.jaxpr, sub.consts) if hasattr(sub, "jaxpr") else (sub, ())
            outs = _run_with_kernels(inner, inner_consts, ins)
        elif name == "scan":
            outs = _scan_on_kernels(p, ins)
        elif name == "while":
            outs = _while_on_kernels(p, ins)
        elif name == "cond":
            branches = [lambda *a, b=b: _run_with_kernels(b.jaxpr, b.consts, a) for b in p["branches"]]
            outs = lax.switch(ins[0], branches, *ins[1:])
        else:
            params = eqn.primitive.get_bind_params(p)
            subfuns, params = params if isinstance(params, tuple) else ((), params)  # older JAX: (subfuns, params)
            outs = eqn.primitive.bind(*subfuns, *ins, **params)
            outs = outs if eqn.primitive.multiple_results else [outs]
        env.update(zip(eqn.outvars, outs, strict=False))
    return [read(v) for v in jaxpr.outvars]


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
