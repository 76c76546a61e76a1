"""39k_Conv2d_GELU_GlobalAvgPool: mean_hw(gelu(conv2d(x, W) + b)), NHWC / HWIO, float32."""
import math

import jax
import jax.numpy as jnp

# batch, in_channels, out_channels, height, width, kernel_size
SIZES = {"full": (128, 8, 64, 256, 256, 3), "small": (4, 16, 128, 32, 32, 3)}


def gelu(x):
    """Exact GELU as PyTorch writes it, 0.5 * x * (1 + erf(x / sqrt(2))).

    (jax.nn.gelu(approximate=False) goes through erfc, which makes XLA:TPU compile this
    fusion several times slower; the two agree to float32 rounding in absolute terms.)
    """
    return 0.5 * x * (1.0 + jax.lax.erf(x * (1.0 / math.sqrt(2.0))))


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    n, cin, cout, h, w, k = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (n, h, w, cin), jnp.float32).astype(dtype)
    wgt = (jax.random.normal(kw, (k, k, cin, cout), jnp.float32) / jnp.sqrt(cin * k * k)).astype(dtype)
    b = (0.1 * jax.random.normal(kb, (cout,), jnp.float32)).astype(dtype)
    return (x, wgt, b), ()


def computation(x, w, b):
    y = jax.lax.conv_general_dilated(
        x, w, window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NHWC", "HWIO", "NHWC")) + b
    y = gelu(y)                             # exact (erf) GELU, PyTorch's default
    return jnp.mean(y, axis=(1, 2))          # adaptive_avg_pool2d(1) + squeeze: [batch, out_channels]


def get_flops():
    n, cin, cout, h, w, k = SIZES["full"]
    return 2 * n * (h - k + 1) * (w - k + 1) * cout * cin * k * k
