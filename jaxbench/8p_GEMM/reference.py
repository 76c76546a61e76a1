"""8p_GEMM: C = A @ B, bf16 inputs, f32 accumulation, bf16 output."""
import jax
import jax.numpy as jnp

SIZES = {"full": (8192, 8192, 28672), "small": (256, 512, 384)}  # M, K, N


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    m, k, n = SIZES[size]
    ka, kb = jax.random.split(jax.random.key(seed))
    a = jax.random.normal(ka, (m, k), dtype)
    b = (jax.random.normal(kb, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    return (a, b), ()


def computation(a, b):
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype)


def get_flops():
    m, k, n = SIZES["full"]
    return 2 * m * k * n
