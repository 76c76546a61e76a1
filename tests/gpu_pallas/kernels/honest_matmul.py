"""An honest GPU kernel for matmul: Triton lowering, K looped inside each (bm, bn) program."""

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

BM, BN, BK = 64, 64, 32


def _kernel(x_ref, y_ref, o_ref, *, k):
    def step(i, acc):
        return acc + jnp.dot(x_ref[:, pl.ds(i * BK, BK)], y_ref[pl.ds(i * BK, BK), :],
                             preferred_element_type=jnp.float32)

    o_ref[...] = lax.fori_loop(0, k // BK, step, jnp.zeros((BM, BN), jnp.float32)).astype(o_ref.dtype)


def computation(x, y):
    m, k = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        functools.partial(_kernel, k=k),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // BM, n // BN),
        in_specs=[pl.BlockSpec((BM, k), lambda i, j: (i, 0)), pl.BlockSpec((k, BN), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j: (i, j)),
        compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=3),
    )(x, y)
