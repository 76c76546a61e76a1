"""35k_Gemm_Scaling_Hardtanh_GELU: gelu(hardtanh((x @ W + b) * s, min, max)), float32."""
import math

import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features
SCALING_FACTOR, HARDTANH_MIN, HARDTANH_MAX = 0.5, -2.0, 2.0


def gelu(x):
    """Exact GELU as PyTorch writes it, 0.5 * x * (1 + erf(x / sqrt(2))).

    (jax.nn.gelu(approximate=False) goes through erfc, which makes XLA:TPU compile this
    fusion several times slower; the two agree to float32 rounding in absolute terms.)
    """
    return 0.5 * x * (1.0 + jax.lax.erf(x * (1.0 / math.sqrt(2.0))))


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    m, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (m, k), jnp.float32).astype(dtype)
    # pre-activations with std ~3, so after scaling by 0.5 the hardtanh clamp is active (~18% of values)
    w = (jax.random.normal(kw, (k, n), jnp.float32) * (3.0 / jnp.sqrt(k))).astype(dtype)
    b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    return (x, w, b), (SCALING_FACTOR, HARDTANH_MIN, HARDTANH_MAX)


def computation(x, w, b, scaling_factor, hardtanh_min, hardtanh_max):
    y = x @ w + b                                   # nn.Linear, W stored [in, out]
    y = y * scaling_factor
    y = jnp.clip(y, hardtanh_min, hardtanh_max)     # nn.Hardtanh(min_val, max_val)
    return gelu(y)                                  # nn.GELU() default: exact (erf) GELU


def get_flops():
    m, k, n = SIZES["full"]
    return 2 * m * k * n
