"""22k_Conv2d_InstanceNorm_Divide: y = instance_norm(conv2d(x, w) + conv_bias) / 2.0, NHWC / HWIO, float32."""
import math

import jax
import jax.numpy as jnp

# batch, height, width, in_channels, out_channels, kernel_size (3x3, stride 1, VALID)
SIZES = {"full": (128, 128, 128, 64, 128, 3), "small": (8, 16, 16, 64, 128, 3)}
DIVIDE_BY, EPS = 2.0, 1e-5


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    n, h, w, cin, cout, k = SIZES[size]
    kx, kw, kcb, kg, kb = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.normal(kx, (n, h, w, cin), dtype)
    weight = (jax.random.normal(kw, (k, k, cin, cout), jnp.float32) / math.sqrt(k * k * cin)).astype(dtype)
    conv_bias = (0.1 * jax.random.normal(kcb, (cout,), jnp.float32)).astype(dtype)
    norm_weight = (1.0 + 0.1 * jax.random.normal(kg, (cout,), jnp.float32)).astype(dtype)
    norm_bias = (0.1 * jax.random.normal(kb, (cout,), jnp.float32)).astype(dtype)
    return (x, weight, conv_bias, norm_weight, norm_bias), (DIVIDE_BY, EPS)


def computation(x, weight, conv_bias, norm_weight, norm_bias, divide_by, eps):
    y = jax.lax.conv_general_dilated(
        x, weight, window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = y + conv_bias
    # InstanceNorm2d: per (sample, channel) statistics over H and W, biased variance.
    mean = jnp.mean(y, axis=(1, 2), keepdims=True)
    var = jnp.mean(jnp.square(y - mean), axis=(1, 2), keepdims=True)
    y = (y - mean) * jax.lax.rsqrt(var + eps) * norm_weight + norm_bias
    return y / divide_by


def get_flops():
    n, h, w, cin, cout, k = SIZES["full"]
    ho, wo = h - k + 1, w - k + 1
    return 2 * n * ho * wo * cout * cin * k * k
