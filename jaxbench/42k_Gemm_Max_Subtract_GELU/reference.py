"""42k_Gemm_Max_Subtract_GELU: GELU(m - mean(m)) with m the max over the batch of x @ W + b.

KernelBench level 2 problem 80, with max_dim = 0. The problem's default max_dim = 1 makes
the output identically zero (the max over dim 1 keeps one column, and subtracting that
column's own mean over dim 1 leaves 0), so the same module is instantiated with
max_dim = 0: the max over the batch, then the mean over the features.
"""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features
MAX_DIM = 0


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    b, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (b, k), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    lin_b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    return (x, w, lin_b), ()


def computation(x, w, lin_b):
    y = x @ w + lin_b                                 # [B, N]
    m = jnp.max(y, axis=MAX_DIM, keepdims=True)       # [1, N]
    m = m - jnp.mean(m, axis=1, keepdims=True)
    return jax.nn.gelu(m, approximate=False)          # [1, N]


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
