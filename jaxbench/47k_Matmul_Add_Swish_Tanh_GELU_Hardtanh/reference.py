"""47k_Matmul_Add_Swish_Tanh_GELU_Hardtanh (KernelBench level 2 problem 95).

hardtanh(gelu(tanh(swish(x @ W + b + add_value)))), exact GELU, hardtanh to [-1, 1].
"""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    b, k, n = SIZES[size]
    kx, kw, kb, ka = jax.random.split(jax.random.key(seed), 4)
    x = jax.random.normal(kx, (b, k), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    lin_b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    add_value = jax.random.normal(ka, (n,), dtype)  # nn.Parameter(torch.randn(out_features))
    return (x, w, lin_b, add_value), ()


def computation(x, w, lin_b, add_value):
    y = x @ w + lin_b
    y = y + add_value
    y = jax.nn.sigmoid(y) * y                  # Swish
    y = jnp.tanh(y)
    y = jax.nn.gelu(y, approximate=False)
    return jnp.clip(y, -1.0, 1.0)              # Hardtanh(min_val=-1, max_val=1)


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
