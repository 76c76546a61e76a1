"""19k_Matmul_Subtract_Multiply_ReLU: y = relu((x @ W + b - subtract_value) * multiply_value), float32."""
import math

import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features
SUBTRACT_VALUE, MULTIPLY_VALUE = 2.0, 1.5  # KernelBench's constants


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    m, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (m, k), dtype)
    # Weights scaled by 2/sqrt(fan_in): pre-activations have std ~2, so after subtracting 2
    # about a sixth of the outputs are positive (with std 1 only ~2% would survive the ReLU).
    w = (2.0 * jax.random.normal(kw, (k, n), jnp.float32) / math.sqrt(k)).astype(dtype)
    b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    return (x, w, b), (SUBTRACT_VALUE, MULTIPLY_VALUE)


def computation(x, w, b, subtract_value, multiply_value):
    y = x @ w + b
    y = y - subtract_value
    y = y * multiply_value
    return jax.nn.relu(y)


def get_flops():
    m, k, n = SIZES["full"]
    return 2 * m * k * n
