import jax
import jax.numpy as jnp

def get_inputs(dtype=jnp.float32, size="full", seed=0):
    b, s, d = {"full": (64, 512, 256), "small": (8, 64, 128)}[size]
    k1, k2 = jax.random.split(jax.random.key(seed))
    return (jax.random.normal(k1, (b, s, d), dtype), jax.random.normal(k2, (b, s, d), dtype)), ()

def computation(q, k):
    scores = jnp.einsum("bqd,bkd->bqk", q, k) / 16.0
    return jax.nn.softmax(scores, axis=-1)
