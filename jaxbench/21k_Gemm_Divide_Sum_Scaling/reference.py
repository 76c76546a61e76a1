"""21k_Gemm_Divide_Sum_Scaling: sum((x @ W.T) / 2, axis=1, keepdims) * 1.5 (KernelBench level 2 problem 14)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, input_size, hidden_size


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, k, n = SIZES[size]
    kx, kw = jax.random.split(jax.random.key(seed))
    x = jax.random.uniform(kx, (b, k), dtype)
    w = jax.random.normal(kw, (n, k), dtype)
    return (x, w), ()


def computation(x, w):
    y = jax.lax.dot_general(x, w.T, (((1,), (0,)), ((), ())), precision=jax.lax.Precision.HIGHEST)
    return jnp.sum(y / 2.0, axis=1, keepdims=True) * 1.5


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
