"""25k_Conv3d_GroupNorm_Mean: y = mean(group_norm(conv3d(x, w) + conv_bias), over C, D, H, W), NDHWC / DHWIO, float32."""
import math

import jax
import jax.numpy as jnp

# batch, depth, height, width, in_channels, out_channels, kernel_size (3x3x3, stride 1, VALID)
SIZES = {"full": (128, 24, 32, 32, 3, 24, 3), "small": (8, 8, 16, 16, 3, 24, 3)}
NUM_GROUPS, EPS = 8, 1e-5


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    n, d, h, w, cin, cout, k = SIZES[size]
    kx, ko, kw, kcb, kg, kb = jax.random.split(jax.random.key(seed), 6)
    # A per-(sample, channel) offset on top of unit noise, so that the per-channel means of
    # the conv output (and hence the final per-sample mean) differ from sample to sample.
    x = (jax.random.normal(kx, (n, d, h, w, cin), jnp.float32)
         + jax.random.normal(ko, (n, 1, 1, 1, cin), jnp.float32)).astype(dtype)
    weight = (jax.random.normal(kw, (k, k, k, cin, cout), jnp.float32) / math.sqrt(k ** 3 * cin)).astype(dtype)
    conv_bias = (0.5 * jax.random.normal(kcb, (cout,), jnp.float32)).astype(dtype)
    # Non-uniform GroupNorm weights: with all-ones weights the mean of the normalised output
    # would be mean(norm_bias) whatever the convolution computed.
    norm_weight = (1.0 + 0.5 * jax.random.normal(kg, (cout,), jnp.float32)).astype(dtype)
    norm_bias = (0.1 * jax.random.normal(kb, (cout,), jnp.float32)).astype(dtype)
    return (x, weight, conv_bias, norm_weight, norm_bias), (NUM_GROUPS, EPS)


def computation(x, weight, conv_bias, norm_weight, norm_bias, num_groups, eps):
    y = jax.lax.conv_general_dilated(
        x, weight, window_strides=(1, 1, 1), padding="VALID",
        dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))
    y = y + conv_bias
    n, d, h, w, c = y.shape
    g = y.reshape(n, d, h, w, num_groups, c // num_groups)
    mean = jnp.mean(g, axis=(1, 2, 3, 5), keepdims=True)
    var = jnp.mean(jnp.square(g - mean), axis=(1, 2, 3, 5), keepdims=True)
    y = ((g - mean) * jax.lax.rsqrt(var + eps)).reshape(n, d, h, w, c)
    y = y * norm_weight + norm_bias
    return jnp.mean(y, axis=(1, 2, 3, 4))  # [batch]


def get_flops():
    n, d, h, w, cin, cout, k = SIZES["full"]
    do, ho, wo = d - k + 1, h - k + 1, w - k + 1
    return 2 * n * do * ho * wo * cout * cin * k ** 3
