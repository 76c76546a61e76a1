"""24k_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish, float32.

y = x @ W + b; y = y * scale; y = y + y; y = clip(y, lo, hi); z = logsumexp(y, axis=1, keepdims);
out = z * mish(z).
"""
import math

import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, input_size, hidden_size
SCALE_FACTOR, CLAMP_MIN, CLAMP_MAX = 2.0, -10.0, 10.0  # KernelBench's constants


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    m, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (m, k), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / math.sqrt(k)).astype(dtype)
    b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    return (x, w, b), (SCALE_FACTOR, CLAMP_MIN, CLAMP_MAX)


def _mish(x):
    return x * jnp.tanh(jax.nn.softplus(x))


def computation(x, w, b, scale_factor, clamp_min, clamp_max):
    y = x @ w + b                    # [batch, hidden]
    y = y * scale_factor
    y = y + y                        # residual add of the tensor to itself
    y = jnp.clip(y, clamp_min, clamp_max)
    z = jax.nn.logsumexp(y, axis=1, keepdims=True)  # [batch, 1]
    return z * _mish(z)


def get_flops():
    m, k, n = SIZES["full"]
    return 2 * m * k * n
