"""The programs behind each public measurement, rebuilt here so the model can describe what was timed.

Every point the model is fitted on or validated against is a program someone
ran on a TPU. To hold the model against it, the same program is built here at
the same shapes and configuration: our own tiled matmul for the Pallas matmul
guide's kernel, jax's own library kernels (``jax.experimental.pallas.ops.tpu``:
splash attention, megablox) for tokamax's and JAXBench's. Tracing gives the kernels'
descriptions; a deviceless compile for the chip gives the code around them.
"""

from __future__ import annotations

import functools
import importlib

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def tiled_matmul(bm: int, bk: int, bn: int, *, transpose_rhs: bool = False, activation=None,
                 vmem_limit_bytes: int | None = None):
    """A tiled matmul as the Pallas TPU matmul guide writes it: an f32 scratch accumulator, K innermost
    ("arbitrary"), the output written at the last K step (optionally through an activation)."""

    def kernel(x_ref, y_ref, z_ref, acc_ref, *, nsteps):
        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        dims = (((1,), (1,)), ((), ())) if transpose_rhs else (((1,), (0,)), ((), ()))
        acc_ref[...] += jax.lax.dot_general(x_ref[...], y_ref[...], dims, preferred_element_type=jnp.float32)

        @pl.when(pl.program_id(2) == nsteps - 1)
        def _():
            result = acc_ref[...] if activation is None else activation(acc_ref[...])
            z_ref[...] = result.astype(z_ref.dtype)

    def matmul(x, y):
        m, k = x.shape
        n = y.shape[0] if transpose_rhs else y.shape[1]
        y_spec = (pl.BlockSpec((bn, bk), lambda i, j, kk: (j, kk)) if transpose_rhs
                  else pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)))
        return pl.pallas_call(
            functools.partial(kernel, nsteps=k // bk),
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=0, grid=(m // bm, n // bn, k // bk),
                in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)), y_spec],
                out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
                scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)]),
            out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary"),
                                                 vmem_limit_bytes=vmem_limit_bytes),
        )(x, y)

    return matmul


def splash_attention(*, heads: int, seq_q: int, seq_kv: int, causal: bool, block_q: int, block_kv: int,
                     block_kv_compute: int, layouts: tuple[int, int, int], save_residuals: bool, scale: float):
    """Attention as tokamax's Pallas TPU flash attention runs it: q scaled, [B, T, H, D] swapped to [B, H, T, D],
    jax's splash attention kernel vmapped over the batch, the output swapped back."""
    splash = importlib.import_module("jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_kernel")
    masks = importlib.import_module("jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_mask")
    one = masks.CausalMask((seq_q, seq_kv)) if causal else masks.FullMask((seq_q, seq_kv))
    sizes = splash.BlockSizes(block_q=block_q, block_kv=block_kv, block_kv_compute=block_kv_compute,
                              q_layout=splash.QKVLayout(layouts[0]), k_layout=splash.QKVLayout(layouts[1]),
                              v_layout=splash.QKVLayout(layouts[2]))
    kernel = splash.make_splash_mha(masks.MultiHeadMask([one] * heads), block_sizes=sizes, head_shards=1,
                                    q_seq_shards=1, save_residuals=save_residuals)

    def attention(q, k, v):
        q = q * jnp.asarray(scale, q.dtype)
        q, k, v = (jnp.swapaxes(x, 1, 2) for x in (q, k, v))
        out = jax.vmap(kernel)(q, k, v)
        if save_residuals:
            out, stats = out
            return jnp.swapaxes(out, 1, 2), stats
        return jnp.swapaxes(out, 1, 2)

    return attention


def megablox(group_sizes: np.ndarray, tiling: tuple[int, int, int], *, transpose_rhs: bool = False,
             transposed: bool = False):
    """A grouped matmul with jax's megablox kernels at static group sizes (so its tile maps are known):
    ``gmm`` (lhs[M, K] @ rhs[G, K, N], or rhs[G, N, K] with ``transpose_rhs``) or ``tgmm`` (``transposed``)."""
    gmm = importlib.import_module("jax.experimental.pallas.ops.tpu.megablox.gmm")
    sizes = np.asarray(group_sizes, np.int32)
    if transposed:
        return lambda lhs, rhs: gmm.tgmm(lhs.T, rhs, jnp.asarray(sizes), preferred_element_type=lhs.dtype,
                                         tiling=tiling)
    return lambda lhs, rhs: gmm.gmm(lhs, rhs, jnp.asarray(sizes), preferred_element_type=lhs.dtype, tiling=tiling,
                                    transpose_rhs=transpose_rhs)
