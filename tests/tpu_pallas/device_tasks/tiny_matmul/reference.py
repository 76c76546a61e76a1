import jax
import jax.numpy as jnp

SIZES = {"full": (256, 512, 256), "small": (128, 256, 128)}


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    m, k, n = SIZES[size]
    kx, ky = jax.random.split(jax.random.key(seed))
    return (jax.random.normal(kx, (m, k), dtype), jax.random.normal(ky, (k, n), dtype)), ()


def computation(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)


def get_flops():
    m, k, n = SIZES["full"]
    return 2 * m * k * n
