import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 1024, 4096, 4), "small": (64, 128, 256, 2)}


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    t, d, f, layers = SIZES[size]
    kx, k1, k2 = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (t, d), dtype)
    w1 = (jax.random.normal(k1, (layers, d, f), jnp.float32) / d ** 0.5).astype(dtype)
    w2 = (jax.random.normal(k2, (layers, f, d), jnp.float32) / f ** 0.5).astype(dtype)
    return (x, w1, w2), ()


def computation(x, w1, w2):
    def layer(h, weights):
        up, down = weights
        a = jax.nn.gelu(jnp.dot(h, up, preferred_element_type=jnp.float32))
        return h + jnp.dot(a.astype(h.dtype), down, preferred_element_type=jnp.float32).astype(h.dtype), None

    out, _ = jax.lax.scan(layer, x, (w1, w2))
    return out
