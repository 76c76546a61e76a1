"""A JAX/Pallas answer to a PyTorch task: the judge sets the module's state on ModelNew with dots as
underscores (linear.weight -> linear_weight, PyTorch's (out, in) layout), as JAXBench's set_weights does."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(x_ref, w_ref, b_ref, o_ref):
    y = jax.lax.dot_general(x_ref[...], w_ref[...], (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    o_ref[...] = jnp.maximum(y + b_ref[...], 0.0).astype(o_ref.dtype)


class ModelNew:
    def __init__(self, in_features, out_features):
        pass

    def forward(self, x):
        w, b = self.linear_weight, self.linear_bias
        m, n = x.shape[0], w.shape[0]
        bm = 128 if m % 128 == 0 else m
        return pl.pallas_call(
            _kernel, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), grid=(m // bm,),
            in_specs=[pl.BlockSpec((bm, x.shape[1]), lambda i: (i, 0)), pl.BlockSpec(w.shape, lambda i: (0, 0)),
                      pl.BlockSpec((1, n), lambda i: (0, 0))],
            out_specs=pl.BlockSpec((bm, n), lambda i: (i, 0)),
        )(x, w, b.reshape(1, n))
