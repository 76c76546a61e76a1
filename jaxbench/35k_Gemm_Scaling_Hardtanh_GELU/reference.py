"""35k_Gemm_Scaling_Hardtanh_GELU: gelu_tanh(clip((x @ W + bias) * 0.5, -2, 2)) (KernelBench level 2 problem 53_Gemm_Scaling_Hardtanh_GELU, JAXBench sizes)."""
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
    y = jnp.clip((jnp.matmul(x, w) + bias) * 0.5, -2, 2)
    return y * 0.5 * (1.0 + jnp.tanh(jnp.sqrt(2.0 / jnp.pi) * (y + 0.044715 * y**3)))


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
