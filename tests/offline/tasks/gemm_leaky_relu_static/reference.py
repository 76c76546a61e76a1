"""relu-with-slope after a float32 GEMM, the slope a static argument: the jaxpr converts the Python float."""
import jax
import jax.numpy as jnp

SIZES = {"full": (2048, 4096, 2048), "small": (256, 512, 384)}


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    m, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (m, k), dtype)
    w = jax.random.normal(kw, (k, n), dtype) / jnp.sqrt(k).astype(dtype)
    bias = jax.random.normal(kb, (n,), dtype)
    return (x, w, bias), (0.1,)


def computation(x, w, bias, negative_slope):
    return jax.nn.leaky_relu((x @ w + bias) * 2.0, negative_slope)
