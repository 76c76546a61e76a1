"""20k_Gemm_Multiply_LeakyReLU: y = leaky_relu((x @ W + b) * multiplier, negative_slope), float32."""
import math

import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features
MULTIPLIER, NEGATIVE_SLOPE = 2.0, 0.1  # KernelBench's constants


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    m, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (m, k), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / math.sqrt(k)).astype(dtype)
    b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    return (x, w, b), (MULTIPLIER, NEGATIVE_SLOPE)


def computation(x, w, b, multiplier, negative_slope):
    y = x @ w + b
    y = y * multiplier
    return jax.nn.leaky_relu(y, negative_slope)


def get_flops():
    m, k, n = SIZES["full"]
    return 2 * m * k * n
