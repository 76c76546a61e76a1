"""47k_Matmul_Add_Swish_Tanh_GELU_Hardtanh: clip(gelu(tanh(swish(x @ W + bias + add))), -1, 1) (KernelBench level 2 problem 95_Matmul_Add_Swish_Tanh_GELU_Hardtanh, JAXBench sizes)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, k, n = SIZES[size]
    kx, kw, kb, ka = jax.random.split(jax.random.key(seed), 4)
    x = jax.random.uniform(kx, (b, k), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)  # JAXBench: zeros
    bias = jax.random.normal(kb, (n,), dtype)  # JAXBench: zeros
    add_value = jax.random.normal(ka, (n,), dtype)  # JAXBench: zeros
    return (x, w, bias, add_value), ()


def computation(x, w, bias, add_value):
    y = jax.nn.swish(x @ w + bias + add_value)
    return jnp.clip(jax.nn.gelu(jnp.tanh(y)), -1.0, 1.0)


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
