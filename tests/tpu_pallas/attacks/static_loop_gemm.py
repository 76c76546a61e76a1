"""Work counter, hidden in a loop with a static bound: a fori_loop over K chunks outside the kernel
(a loop body that a counter reads once looks 1/trips as expensive)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CHUNK = 64


def _epilogue(y_ref, b_ref, o_ref):
    o_ref[...] = jax.nn.gelu(y_ref[...] + b_ref[...], approximate=True).astype(o_ref.dtype)


def computation(x, w, b):
    m, k = x.shape
    n = w.shape[1]

    def body(i, acc):
        xs = jax.lax.dynamic_slice(x, (0, i * CHUNK), (m, CHUNK))
        ws = jax.lax.dynamic_slice(w, (i * CHUNK, 0), (CHUNK, n))
        return acc + jnp.dot(xs, ws, preferred_element_type=jnp.float32)

    y = jax.lax.fori_loop(0, k // CHUNK, body, jnp.zeros((m, n), jnp.float32))
    return pl.pallas_call(_epilogue, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype))(y, b.reshape(1, n))
