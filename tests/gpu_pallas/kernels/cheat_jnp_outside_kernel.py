"""A cheat: the GEMM runs in jnp outside the kernel; a Triton kernel only applies the bias and GELU."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

BM, BN = 64, 128


def _epilogue(y_ref, b_ref, o_ref):
    o_ref[...] = jax.nn.gelu(y_ref[...] + b_ref[...], approximate=True).astype(o_ref.dtype)


def computation(x, w, b):
    y = jnp.dot(x, w, preferred_element_type=jnp.float32)
    m, n = y.shape
    return pl.pallas_call(_epilogue, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), grid=(m // BM, n // BN),
                          in_specs=[pl.BlockSpec((BM, BN), lambda i, j: (i, j)),
                                    pl.BlockSpec((1, BN), lambda i, j: (0, j))],
                          out_specs=pl.BlockSpec((BM, BN), lambda i, j: (i, j)),
                          compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=1))(y, b.reshape(1, n))
