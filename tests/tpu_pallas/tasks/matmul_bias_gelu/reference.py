import jax
import jax.numpy as jnp

SIZES = {"full": (2048, 4096, 8192), "small": (128, 256, 384)}


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    m, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (m, k), dtype)
    w = jax.random.normal(kw, (k, n), dtype) / jnp.sqrt(k).astype(dtype)
    b = jax.random.normal(kb, (n,), dtype)
    return (x, w, b), ()


def computation(x, w, b):
    return jax.nn.gelu(jnp.dot(x, w, preferred_element_type=jnp.float32) + b, approximate=True).astype(x.dtype)
