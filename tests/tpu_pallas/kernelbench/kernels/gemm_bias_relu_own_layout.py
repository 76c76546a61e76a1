"""An answer that keeps a weight in its own shape: the bias as (1, N), the shape its kernel's BlockSpec wants
(a (N,) bias does not trace). Its set_weights converts from PyTorch's layout, as JAXBench's do: never called."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK_M, BLOCK_N, BLOCK_K = 256, 128, 512


def _kernel(x_ref, w_ref, b_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = jax.nn.relu(acc_ref[...] + b_ref[...]).astype(o_ref.dtype)


def _block(dim, block):
    return block if dim % block == 0 else dim


class ModelNew:
    def __init__(self, in_features, out_features):
        self.weight = jnp.zeros((in_features, out_features))
        self.bias = jnp.zeros((1, out_features))

    def set_weights(self, weights_dict):
        raise AssertionError("the judge sets the task's weights itself")

    def forward(self, x):
        m, k = x.shape
        n = self.weight.shape[1]
        bm, bn, bk = _block(m, BLOCK_M), _block(n, BLOCK_N), _block(k, BLOCK_K)
        return pl.pallas_call(
            _kernel,
            out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
            grid=(m // bm, n // bn, k // bk),
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                      pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
                      pl.BlockSpec((1, bn), lambda i, j, kk: (0, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
            scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
        )(x, self.weight, self.bias)
