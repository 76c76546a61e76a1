"""49k_Matmul_AvgPool_GELU_Scale_Max: max(2 * gelu(AvgPool1d_16(x @ W + b)), axis=1) (KernelBench level 2 problem 98)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features
POOL = 16
SCALE_FACTOR = 2.0


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(kx, (b, k), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)  # JAXBench: zeros
    bias = jax.random.normal(kb, (n,), dtype)  # JAXBench: zeros
    return (x, w, bias), ()


def computation(x, w, bias):
    h = (jnp.matmul(x, w) + bias)[:, None, :]
    pooled = jax.lax.reduce_window(h, 0.0, jax.lax.add, (1, 1, POOL), (1, 1, POOL), "VALID") / POOL
    return jnp.max(jax.nn.gelu(pooled[:, 0, :]) * SCALE_FACTOR, axis=1)


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
