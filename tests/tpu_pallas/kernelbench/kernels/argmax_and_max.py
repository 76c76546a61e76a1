"""Each row's argmax and max from one Pallas kernel with two outputs, returned as the reference's dict."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 64


def _kernel(x_ref, index_ref, value_ref):
    x = x_ref[...]
    value_ref[...] = jnp.max(x, axis=1, keepdims=True)
    index_ref[...] = jnp.argmax(x, axis=1, keepdims=True).astype(jnp.int32)


class ModelNew:
    def __init__(self):
        pass

    def forward(self, x):
        rows, width = x.shape
        block = ROWS if rows % ROWS == 0 else rows
        out_spec = pl.BlockSpec((block, 1), lambda i: (i, 0))
        index, value = pl.pallas_call(
            _kernel, grid=(rows // block,), in_specs=[pl.BlockSpec((block, width), lambda i: (i, 0))],
            out_specs=[out_spec, out_spec],
            out_shape=[jax.ShapeDtypeStruct((rows, 1), jnp.int32), jax.ShapeDtypeStruct((rows, 1), x.dtype)],
        )(x)
        return {"index": index[:, 0], "value": value[:, 0]}
