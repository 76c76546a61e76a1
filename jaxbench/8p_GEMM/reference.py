"""8p_GEMM: C = A @ B in bfloat16 at Llama-3.1-70B's hidden -> MLP projection size."""
import jax
import jax.numpy as jnp

SIZES = {"full": (8192, 8192, 28672), "small": (256, 512, 384)}  # M, K, N


def get_inputs(dtype=jnp.bfloat16, size="full", seed=42):
    m, k, n = SIZES[size]
    ka, kb = jax.random.split(jax.random.key(seed))
    a = jax.random.normal(ka, (m, k), dtype)
    b = jax.random.normal(kb, (k, n), dtype) * 0.02
    return (a, b), ()


def computation(a, b):
    return jnp.dot(a, b)


def get_flops():
    m, k, n = SIZES["full"]
    return 2 * m * k * n
