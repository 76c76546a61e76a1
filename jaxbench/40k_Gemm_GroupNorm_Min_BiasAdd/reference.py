"""40k_Gemm_GroupNorm_Min_BiasAdd: min over features of GroupNorm(x @ W + b), plus a per-channel bias.

KernelBench level 2 problem 75. The PyTorch module adds a (1, C, 1, 1) bias to the
(B, 1) row minima, which broadcasts to (1, C, B, 1); here the unit axes are dropped
and the output is that same (C, B) array: out[c, i] = min_j gn(y)[i, j] + bias[c].
"""
import jax
import jax.numpy as jnp

# batch, in_features, out_features, num_groups (group size 16 at both sizes)
SIZES = {"full": (4096, 8192, 8192, 512), "small": (256, 512, 384, 24)}
EPS = 1e-5


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    b, k, n, groups = SIZES[size]
    kx, kw, kb, kg, kgb, kbias = jax.random.split(jax.random.key(seed), 6)
    x = jax.random.normal(kx, (b, k), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    lin_b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    gn_w = (1.0 + 0.1 * jax.random.normal(kg, (n,), jnp.float32)).astype(dtype)
    gn_b = (0.1 * jax.random.normal(kgb, (n,), jnp.float32)).astype(dtype)
    bias = jax.random.normal(kbias, (n,), dtype)
    return (x, w, lin_b, gn_w, gn_b, bias), (groups, EPS)


def computation(x, w, lin_b, gn_w, gn_b, bias, num_groups, eps):
    y = x @ w + lin_b                                   # Linear: [B, C]
    b, c = y.shape
    g = y.reshape(b, num_groups, c // num_groups)       # GroupNorm over channel groups, per row
    mean = jnp.mean(g, axis=-1, keepdims=True)
    var = jnp.var(g, axis=-1, keepdims=True)
    y = ((g - mean) * jax.lax.rsqrt(var + eps)).reshape(b, c) * gn_w + gn_b
    row_min = jnp.min(y, axis=1)                        # [B]
    return bias[:, None] + row_min[None, :]             # [C, B]


def get_flops():
    b, k, n, _ = SIZES["full"]
    return 2 * b * k * n  # the GEMM; the GroupNorm, min and bias add are O(B*C)
