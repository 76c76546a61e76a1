import jax
import jax.numpy as jnp

SIZES = {"full": (8192, 8192, 8192), "small": (256, 512, 256)}


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    m, k, n = SIZES[size]
    kx, ky = jax.random.split(jax.random.key(seed))
    return (jax.random.normal(kx, (m, k), dtype), jax.random.normal(ky, (k, n), dtype)), ()


def computation(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)
