"""Work counter, hidden in a loop: the contraction runs chunk by chunk in a while_loop outside the kernel,
with a trip count read from the data so that no static bound exists."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CHUNK = 128


def _epilogue(y_ref, b_ref, o_ref):
    o_ref[...] = jax.nn.gelu(y_ref[...] + b_ref[...], approximate=True).astype(o_ref.dtype)


def computation(x, w, b):
    m, k = x.shape
    n = w.shape[1]
    trips = (k // CHUNK) + (x[0, 0] * 0).astype(jnp.int32)  # data-dependent to a static counter

    def body(state):
        i, acc = state
        xs = jax.lax.dynamic_slice(x, (0, i * CHUNK), (m, CHUNK))
        ws = jax.lax.dynamic_slice(w, (i * CHUNK, 0), (CHUNK, n))
        return i + 1, acc + jnp.dot(xs, ws, preferred_element_type=jnp.float32)

    _, y = jax.lax.while_loop(lambda s: s[0] < trips, body, (jnp.int32(0), jnp.zeros((m, n), jnp.float32)))
    return pl.pallas_call(_epilogue, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype))(y, b.reshape(1, n))
