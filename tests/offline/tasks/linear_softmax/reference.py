import jax
import jax.numpy as jnp

SIZES = {"full": (2048, 1024, 4096), "small": (64, 256, 512)}  # batch, in_features, out_features


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (b, k), dtype)
    w = (jax.random.normal(kw, (n, k), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    bias = jax.random.normal(kb, (n,), dtype)
    return (x, w, bias), ()


def computation(x, w, bias):
    return jax.nn.softmax(x @ w.T + bias, axis=-1)
