"""44k_Matmul_Divide_GELU: GELU((x @ W + b) / divisor), exact GELU (KernelBench level 2 problem 86)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, input_size, output_size
DIVISOR = 10.0


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    b, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (b, k), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    lin_b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    return (x, w, lin_b), (DIVISOR,)


def computation(x, w, lin_b, divisor):
    y = (x @ w + lin_b) / divisor
    return jax.nn.gelu(y, approximate=False)


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
