"""41k_Gemm_Add_ReLU: relu(x @ W + bias), the Linear without its own bias (KernelBench level 2 problem 76)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    b, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (b, k), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    bias = jax.random.normal(kb, (n,), dtype)  # nn.Parameter(torch.randn(out_features))
    return (x, w, bias), ()


def computation(x, w, bias):
    return jax.nn.relu(x @ w + bias)


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
