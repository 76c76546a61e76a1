"""26k_BMM_InstanceNorm_Sum_ResidualAdd_Multiply, float32.

h = x @ W + b; h = per-row normalisation over the out features (PyTorch InstanceNorm2d on
h viewed as [batch, 1, 1, out], affine=False); out = (h + y) * y.
"""
import math

import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features
EPS = 1e-5


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    m, k, n = SIZES[size]
    kx, ky, kw, kb = jax.random.split(jax.random.key(seed), 4)
    x = jax.random.normal(kx, (m, k), dtype)
    y = jax.random.normal(ky, (m, n), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / math.sqrt(k)).astype(dtype)
    b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    return (x, y, w, b), (EPS,)


def computation(x, y, w, b, eps):
    h = x @ w + b                                   # [batch, out]
    mean = jnp.mean(h, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(h - mean), axis=-1, keepdims=True)  # biased, as InstanceNorm
    h = (h - mean) * jax.lax.rsqrt(var + eps)
    h = h + y
    return h * y


def get_flops():
    m, k, n = SIZES["full"]
    return 2 * m * k * n
