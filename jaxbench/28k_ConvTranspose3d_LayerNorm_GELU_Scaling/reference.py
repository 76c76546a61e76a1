"""28k_ConvTranspose3d_LayerNorm_GELU_Scaling, NDHWC / DHWIO, float32.

y = conv_transpose3d(x, w, stride 2, PyTorch padding 1) + conv_bias; y = layer_norm over channels;
y = gelu(y) (exact, erf); y = y * scaling_factor.
"""
import math

import jax
import jax.numpy as jnp

# batch, depth, height, width, in_channels, out_channels, kernel_size, stride, padding (PyTorch's)
SIZES = {"full": (32, 16, 32, 32, 32, 64, 4, 2, 1), "small": (8, 4, 8, 8, 16, 32, 4, 2, 1)}
EPS, SCALING_FACTOR = 1e-5, 1.0


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    n, d, h, w, cin, cout, k, s, p = SIZES[size]
    kx, kw, kcb, kg, kb = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.normal(kx, (n, d, h, w, cin), dtype)
    # Each output position receives (k/s)^3 = 8 kernel taps per input channel.
    weight = (jax.random.normal(kw, (k, k, k, cin, cout), jnp.float32)
              / math.sqrt(cin * (k // s) ** 3)).astype(dtype)
    conv_bias = (0.1 * jax.random.normal(kcb, (cout,), jnp.float32)).astype(dtype)
    ln_weight = (1.0 + 0.1 * jax.random.normal(kg, (cout,), jnp.float32)).astype(dtype)
    ln_bias = (0.1 * jax.random.normal(kb, (cout,), jnp.float32)).astype(dtype)
    return (x, weight, conv_bias, ln_weight, ln_bias), (k, s, p, EPS, SCALING_FACTOR)


def computation(x, weight, conv_bias, ln_weight, ln_bias, kernel_size, stride, padding, eps, scaling_factor):
    # PyTorch's padding p on a transposed conv is k - 1 - p of padding on the dilated input:
    # output size (in - 1) * stride - 2p + k.
    pad = kernel_size - 1 - padding
    y = jax.lax.conv_transpose(
        x, weight, strides=(stride,) * 3, padding=((pad, pad),) * 3,
        dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))
    y = y + conv_bias
    mean = jnp.mean(y, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(y - mean), axis=-1, keepdims=True)
    y = (y - mean) * jax.lax.rsqrt(var + eps) * ln_weight + ln_bias
    y = jax.nn.gelu(y, approximate=False)
    return y * scaling_factor


def get_flops():
    # Useful work of the transposed conv: every input element meets k^3 taps per (C_in, C_out)
    # pair. (The dilated-input formulation XLA is given multiplies 8x as many zeros.)
    n, d, h, w, cin, cout, k, s, p = SIZES["full"]
    return 2 * n * d * h * w * cin * cout * k ** 3
