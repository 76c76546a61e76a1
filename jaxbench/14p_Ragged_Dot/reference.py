"""14p_Ragged_Dot: per-expert matmul out[g] = x[g] @ w[g] with equal groups (Mixtral-8x7B expert up-projection)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (8, 8192, 4096, 14336), "small": (4, 512, 256, 512)}  # groups, rows M (all groups), K, N


def get_inputs(dtype=jnp.bfloat16, size="full", seed=42):
    g, m, k, n = SIZES[size]
    kx, kw = jax.random.split(jax.random.key(seed))
    x = jax.random.normal(kx, (g, m // g, k), dtype)
    w = jax.random.normal(kw, (g, k, n), dtype) * 0.02
    return (x, w), ()


def computation(x, w):
    return jnp.einsum("gmk,gkn->gmn", x, w)


def get_flops():
    g, m, k, n = SIZES["full"]
    return 2 * g * (m // g) * k * n
