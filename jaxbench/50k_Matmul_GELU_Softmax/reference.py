"""50k_Matmul_GELU_Softmax: softmax(gelu(x @ W + b)) over features, exact GELU (KernelBench level 2 problem 99)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    b, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (b, k), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    lin_b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    return (x, w, lin_b), ()


def computation(x, w, lin_b):
    y = jax.nn.gelu(x @ w + lin_b, approximate=False)
    return jax.nn.softmax(y, axis=1)


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
