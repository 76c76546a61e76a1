"""The matmul happens in jnp; the 'kernel' only copies its result."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _copy(y_ref, o_ref):
    o_ref[...] = y_ref[...]


def computation(x, y):
    z = jnp.dot(x, y)
    return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct(z.shape, z.dtype))(z)
