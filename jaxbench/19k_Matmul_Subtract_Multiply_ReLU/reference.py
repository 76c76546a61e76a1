"""19k_Matmul_Subtract_Multiply_ReLU: relu((x @ W + bias - 2.0) * 1.5) (KernelBench level 2 problem 9_Matmul_Subtract_Multiply_ReLU, JAXBench sizes)."""
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
    return jax.nn.relu((jnp.matmul(x, w) + bias - 2.0) * 1.5)


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
