"""ReLU in one Pallas kernel, as a KernelBench-style ModelNew."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(x_ref, o_ref):
    o_ref[...] = jnp.maximum(x_ref[...], 0.0)


class ModelNew:
    def __init__(self):
        pass

    def forward(self, x):
        rows = 256 if x.shape[0] % 256 == 0 else x.shape[0]
        spec = pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))
        return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // rows,),
                              in_specs=[spec], out_specs=spec)(x)
