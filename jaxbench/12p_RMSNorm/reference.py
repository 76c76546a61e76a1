"""12p_RMSNorm: y = x / sqrt(mean(x^2) + eps) * scale over the last axis (Llama-3.1-70B), normalised in float32."""
import jax
import jax.numpy as jnp

SIZES = {"full": (8, 4096, 8192), "small": (2, 256, 1024)}  # batch, seq, embed
EPS = 1e-5


def get_inputs(dtype=jnp.bfloat16, size="full", seed=42):
    b, s, d = SIZES[size]
    kx, ks = jax.random.split(jax.random.key(seed))
    x = jax.random.normal(kx, (b, s, d), dtype)
    scale = jax.random.normal(ks, (d,), dtype) * 0.1 + 1.0
    return (x, scale), ()


def computation(x, scale):
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(jnp.square(x32), axis=-1, keepdims=True) + EPS)
    return normed.astype(x.dtype) * scale


def get_flops():
    b, s, d = SIZES["full"]
    return 5 * b * s * d
