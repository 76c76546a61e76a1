"""46k: logsumexp over channels of conv + hardswish(tanh(GroupNorm(conv))), NCHW (KernelBench level 2 problem 92)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (128, 8, 128, 128, 64, 3), "small": (4, 8, 34, 34, 64, 3)}  # N, C_in, H, W, C_out, kernel
GROUPS = 16
EPS = 1e-5


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    n, cin, h, w, cout, k = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.uniform(keys[0], (n, cin, h, w), dtype)
    weight = (jax.random.normal(keys[1], (cout, cin, k, k), jnp.float32) / (cin * k * k) ** 0.5).astype(dtype)  # JAXBench: zeros
    conv_bias = jax.random.normal(keys[2], (cout,), dtype)  # JAXBench: zeros
    gn_weight = 1.0 + 0.1 * jax.random.normal(keys[3], (cout,), dtype)  # JAXBench: ones
    gn_bias = 0.1 * jax.random.normal(keys[4], (cout,), dtype)  # JAXBench: zeros
    return (x, weight, conv_bias, gn_weight, gn_bias), ()


def computation(x, weight, conv_bias, gn_weight, gn_bias):
    y = jax.lax.conv_general_dilated(jnp.transpose(x, (0, 2, 3, 1)), jnp.transpose(weight, (2, 3, 1, 0)),
                                     (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    conv = jnp.transpose(y + conv_bias, (0, 3, 1, 2))  # NCHW
    n, c, h, w = conv.shape
    g = conv.reshape(n, GROUPS, c // GROUPS, h, w)
    g = (g - jnp.mean(g, axis=(2, 3, 4), keepdims=True)) / jnp.sqrt(jnp.var(g, axis=(2, 3, 4), keepdims=True) + EPS)
    t = jnp.tanh(g.reshape(n, c, h, w) * gn_weight[None, :, None, None] + gn_bias[None, :, None, None])
    hard_swish = t * jnp.minimum(jnp.maximum(t + 3, 0), 6) / 6
    return jax.scipy.special.logsumexp(conv + hard_swish, axis=1, keepdims=True)


def get_flops():
    n, cin, h, w, cout, k = SIZES["full"]
    return 2 * n * cout * (h - k + 1) * (w - k + 1) * cin * k * k
