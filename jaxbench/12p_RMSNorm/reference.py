"""12p_RMSNorm: y = x / sqrt(mean(x^2, last axis) + eps) * weight, bf16 in/out, float32 inside."""
import jax
import jax.numpy as jnp

SIZES = {"full": (8, 4096, 8192), "small": (2, 256, 1024)}  # batch, seq, hidden
EPS = 1e-6


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, s, d = SIZES[size]
    kx, kw = jax.random.split(jax.random.key(seed))
    x = jax.random.normal(kx, (b, s, d), dtype)
    weight = (1.0 + 0.1 * jax.random.normal(kw, (d,), jnp.float32)).astype(dtype)
    return (x, weight), (EPS,)


def computation(x, weight, eps):
    xf = x.astype(jnp.float32)
    inv_rms = jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return (xf * inv_rms * weight.astype(jnp.float32)).astype(x.dtype)


def get_flops():
    b, s, d = SIZES["full"]
    return 4 * b * s * d  # square, sum, scale by 1/rms, scale by weight
