"""46k_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp (KernelBench level 2 problem 92).

c = conv3x3(x) + b (VALID), h = hardswish(tanh(GroupNorm(c))), out = logsumexp over channels of c + h.
Layout NHWC activations, HWIO kernel.
"""
import jax
import jax.numpy as jnp

# batch, height, width, in_channels, out_channels, kernel_size, groups
SIZES = {"full": (128, 128, 128, 8, 64, 3, 16), "small": (8, 32, 32, 8, 64, 3, 16)}
EPS = 1e-5


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    n, h, w, cin, cout, ks, groups = SIZES[size]
    kx, kw, kb, kg, kgb = jax.random.split(jax.random.key(seed), 5)
    fan_in = cin * ks * ks
    x = jax.random.normal(kx, (n, h, w, cin), dtype)
    kernel = (jax.random.normal(kw, (ks, ks, cin, cout), jnp.float32) / jnp.sqrt(fan_in)).astype(dtype)
    conv_b = (0.1 * jax.random.normal(kb, (cout,), jnp.float32)).astype(dtype)
    gn_w = (1.0 + 0.1 * jax.random.normal(kg, (cout,), jnp.float32)).astype(dtype)
    gn_b = (0.1 * jax.random.normal(kgb, (cout,), jnp.float32)).astype(dtype)
    return (x, kernel, conv_b, gn_w, gn_b), (groups, EPS)


def computation(x, kernel, conv_b, gn_w, gn_b, groups, eps):
    c = jax.lax.conv_general_dilated(
        x, kernel, window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NHWC", "HWIO", "NHWC")) + conv_b          # [N, H-2, W-2, C]
    n, ho, wo, ch = c.shape
    g = c.reshape(n, ho, wo, groups, ch // groups)                     # GroupNorm per sample and group
    mean = jnp.mean(g, axis=(1, 2, 4), keepdims=True)
    var = jnp.var(g, axis=(1, 2, 4), keepdims=True)
    y = ((g - mean) * jax.lax.rsqrt(var + eps)).reshape(n, ho, wo, ch) * gn_w + gn_b
    y = jnp.tanh(y)
    y = y * jnp.clip(y + 3.0, 0.0, 6.0) / 6.0                          # HardSwish
    return jax.nn.logsumexp(c + y, axis=-1, keepdims=True)             # [N, H-2, W-2, 1]


def get_flops():
    n, h, w, cin, cout, ks, _ = SIZES["full"]
    ho, wo = h - ks + 1, w - ks + 1
    return 2 * n * ho * wo * cout * cin * ks * ks  # the convolution; the rest is O(N*Ho*Wo*C)
