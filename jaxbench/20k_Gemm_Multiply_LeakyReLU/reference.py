"""20k_Gemm_Multiply_LeakyReLU: leaky_relu((x @ W + bias) * 2.0, slope 0.1) (KernelBench level 2 problem 12_Gemm_Multiply_LeakyReLU, JAXBench sizes)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(kx, (b, k), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)  # JAXBench: zeros
    bias = jax.random.normal(kb, (n,), dtype)  # JAXBench: zeros
    return (x, w, bias), ()


def computation(x, w, bias):
    y = (jnp.matmul(x, w) + bias) * 2.0
    return jnp.where(y >= 0, y, y * 0.1)


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
