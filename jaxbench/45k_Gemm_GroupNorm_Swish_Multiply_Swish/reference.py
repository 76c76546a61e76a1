"""45k_Gemm_GroupNorm_Swish_Multiply_Swish: swish(swish(GN(x @ W + b)) * m) (KernelBench level 2 problem 88)."""
import jax
import jax.numpy as jnp

# batch, in_features, out_features, num_groups (group size 32 at both sizes)
SIZES = {"full": (4096, 8192, 8192, 256), "small": (256, 512, 384, 12)}
EPS = 1e-5


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    b, k, n, groups = SIZES[size]
    kx, kw, kb, kg, kgb, km = jax.random.split(jax.random.key(seed), 6)
    x = jax.random.normal(kx, (b, k), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    lin_b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    gn_w = (1.0 + 0.1 * jax.random.normal(kg, (n,), jnp.float32)).astype(dtype)
    gn_b = (0.1 * jax.random.normal(kgb, (n,), jnp.float32)).astype(dtype)
    mul_w = jax.random.normal(km, (n,), dtype)  # nn.Parameter(torch.randn(out_features))
    return (x, w, lin_b, gn_w, gn_b, mul_w), (groups, EPS)


def computation(x, w, lin_b, gn_w, gn_b, mul_w, num_groups, eps):
    y = x @ w + lin_b                                   # Linear: [B, C]
    b, c = y.shape
    g = y.reshape(b, num_groups, c // num_groups)       # GroupNorm over channel groups, per row
    mean = jnp.mean(g, axis=-1, keepdims=True)
    var = jnp.var(g, axis=-1, keepdims=True)
    y = ((g - mean) * jax.lax.rsqrt(var + eps)).reshape(b, c) * gn_w + gn_b
    y = y * jax.nn.sigmoid(y)                           # Swish
    y = y * mul_w
    return y * jax.nn.sigmoid(y)                        # Swish


def get_flops():
    b, k, n, _ = SIZES["full"]
    return 2 * b * k * n
