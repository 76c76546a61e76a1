"""Exact (erf) GELU after a float32 GEMM: jax.nn.gelu(approximate=False) traces to erfc."""
import jax
import jax.numpy as jnp

SIZES = {"full": (2048, 4096, 2048), "small": (256, 512, 384)}


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    m, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (m, k), dtype)
    w = jax.random.normal(kw, (k, n), dtype) / jnp.sqrt(k).astype(dtype)
    bias = jax.random.normal(kb, (n,), dtype)
    return (x, w, bias), ()


def computation(x, w, bias):
    return jax.nn.gelu((x @ w + bias) / 10.0, approximate=False)
