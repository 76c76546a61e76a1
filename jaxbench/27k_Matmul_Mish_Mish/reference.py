"""27k_Matmul_Mish_Mish: y = mish(mish(x @ W + b)), mish(v) = v * tanh(softplus(v)), float32."""
import math

import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    m, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (m, k), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / math.sqrt(k)).astype(dtype)
    b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    return (x, w, b), ()


def _mish(v):
    return v * jnp.tanh(jax.nn.softplus(v))


def computation(x, w, b):
    y = x @ w + b
    return _mish(_mish(y))


def get_flops():
    m, k, n = SIZES["full"]
    return 2 * m * k * n
