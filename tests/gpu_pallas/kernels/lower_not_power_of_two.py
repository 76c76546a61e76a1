"""A GPU kernel Triton refuses (48-row blocks: not a power of 2) for matmul_bias_gelu: Triton lowering, K looped inside each (bm, bn) program."""

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

BM, BN, BK = 48, 128, 32


def _kernel(x_ref, w_ref, b_ref, o_ref, *, k):
    def step(i, acc):
        x = x_ref[:, pl.ds(i * BK, BK)]
        w = w_ref[pl.ds(i * BK, BK), :]
        return acc + jnp.dot(x, w, preferred_element_type=jnp.float32)

    acc = lax.fori_loop(0, k // BK, step, jnp.zeros((BM, BN), jnp.float32))
    o_ref[...] = jax.nn.gelu(acc + b_ref[...].astype(jnp.float32), approximate=True).astype(o_ref.dtype)


def computation(x, w, b):
    m, k = x.shape
    n = w.shape[1]
    return pl.pallas_call(
        functools.partial(_kernel, k=k),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // BM, n // BN),
        in_specs=[pl.BlockSpec((BM, k), lambda i, j: (i, 0)), pl.BlockSpec((k, BN), lambda i, j: (0, j)),
                  pl.BlockSpec((1, BN), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j: (i, j)),
        compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=3),
    )(x, w, b.reshape(1, n))
