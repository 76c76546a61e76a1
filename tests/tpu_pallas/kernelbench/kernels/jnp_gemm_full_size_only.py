"""The GEMM left in jnp with only the ReLU in Pallas, and sizes hard-coded at the full size (as a copied CONFIG
does), so the module does not even trace at the judge's derived check size: the refusal that matters is the
policy's, at the full size."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BATCH = 2048


def _relu(x_ref, o_ref):
    o_ref[...] = jnp.maximum(x_ref[...], 0.0)


class ModelNew:
    def __init__(self, in_features, out_features):
        self.weight = jnp.zeros((in_features, out_features))
        self.bias = jnp.zeros((out_features,))

    def forward(self, x):
        y = (jnp.matmul(x, self.weight) + self.bias).reshape(BATCH, self.weight.shape[1])
        spec = pl.BlockSpec((256, y.shape[1]), lambda i: (i, 0))
        return pl.pallas_call(_relu, out_shape=jax.ShapeDtypeStruct(y.shape, y.dtype), grid=(BATCH // 256,),
                              in_specs=[spec], out_specs=spec)(y)
