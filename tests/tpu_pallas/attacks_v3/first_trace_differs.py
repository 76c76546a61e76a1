"""Class 3: the first trace (the full size: proven, compiled, timed, estimated) returns a kernel that ignores
its inputs; every later trace (the check size) the honest kernel. Shapes need not differ."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

# @include honest_matmul_bias_gelu.py as honest_computation

_TRACES = [0]


def _fill(x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)


def computation(x, w, b):
    _TRACES[0] += 1
    if _TRACES[0] == 1:
        spec = pl.BlockSpec((128, 128), lambda i, j: (i, j))
        return pl.pallas_call(_fill, out_shape=jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), x.dtype),
                              grid=(x.shape[0] // 128, w.shape[1] // 128), in_specs=[spec], out_specs=spec)(x[:, :w.shape[1]])
    return honest_computation(x, w, b)
