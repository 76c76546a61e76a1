"""Correct on the first call, zeros from the kernel afterwards."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

# @include honest_matmul.py as honest_computation

_CALLS = [0]


def _zeros(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)


def computation(x, y):
    _CALLS[0] += 1
    if _CALLS[0] == 1:
        return honest_computation(x, y)
    return pl.pallas_call(_zeros, out_shape=jax.ShapeDtypeStruct((x.shape[0], y.shape[1]), x.dtype))(x, y)
