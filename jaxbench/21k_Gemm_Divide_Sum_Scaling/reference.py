"""21k_Gemm_Divide_Sum_Scaling: y = sum(x @ W / 2, axis=1, keepdims=True) * 1.5, float32."""
import math

import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, input_size, hidden_size
DIVISOR, SCALING_FACTOR = 2.0, 1.5  # KernelBench's constants


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    m, k, n = SIZES[size]
    kx, kw = jax.random.split(jax.random.key(seed))
    x = jax.random.normal(kx, (m, k), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / math.sqrt(k)).astype(dtype)  # no bias in this model
    return (x, w), (DIVISOR, SCALING_FACTOR)


def computation(x, w, divisor, scaling_factor):
    y = x @ w
    y = y / divisor
    y = jnp.sum(y, axis=1, keepdims=True)
    return y * scaling_factor


def get_flops():
    # The operator as written: the full [batch, hidden] matmul (a kernel may take the
    # matrix-vector shortcut described in kernel_task.yaml and do far less).
    m, k, n = SIZES["full"]
    return 2 * m * k * n
