"""18k_Conv2D_ReLU_BiasAdd: y = relu(conv2d(x, w) + conv_bias) + bias, NHWC / HWIO, float32."""
import math

import jax
import jax.numpy as jnp

# batch, height, width, in_channels, out_channels, kernel_size (3x3, stride 1, VALID)
SIZES = {"full": (128, 128, 128, 64, 128, 3), "small": (8, 16, 16, 64, 128, 3)}


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    n, h, w, cin, cout, k = SIZES[size]
    kx, kw, kcb, kb = jax.random.split(jax.random.key(seed), 4)
    x = jax.random.normal(kx, (n, h, w, cin), dtype)
    weight = (jax.random.normal(kw, (k, k, cin, cout), jnp.float32) / math.sqrt(k * k * cin)).astype(dtype)
    conv_bias = (0.1 * jax.random.normal(kcb, (cout,), jnp.float32)).astype(dtype)
    bias = (0.1 * jax.random.normal(kb, (cout,), jnp.float32)).astype(dtype)  # PyTorch's (C, 1, 1) bias
    return (x, weight, conv_bias, bias), ()


def computation(x, weight, conv_bias, bias):
    y = jax.lax.conv_general_dilated(
        x, weight, window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = jax.nn.relu(y + conv_bias)
    return y + bias


def get_flops():
    n, h, w, cin, cout, k = SIZES["full"]
    ho, wo = h - k + 1, w - k + 1
    return 2 * n * ho * wo * cout * cin * k * k
