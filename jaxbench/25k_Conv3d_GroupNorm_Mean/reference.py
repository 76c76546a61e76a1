"""25k_Conv3d_GroupNorm_Mean: mean(GroupNorm(conv3d(x, W) + b)) per sample, NCDHW (KernelBench level 2 problem 23)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (128, 3, 24, 32, 32, 24, 3), "small": (8, 3, 8, 16, 16, 24, 3)}  # N, C_in, D, H, W, C_out, kernel
GROUPS = 8
EPS = 1e-5


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    n, cin, d, h, w, cout, k = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.uniform(keys[0], (n, cin, d, h, w), dtype)
    weight = (jax.random.normal(keys[1], (cout, cin, k, k, k), jnp.float32) / (cin * k**3) ** 0.5).astype(dtype)  # JAXBench: zeros
    conv_bias = 0.1 * jax.random.normal(keys[2], (cout,), dtype)  # JAXBench: zeros
    gamma = 1.0 + 0.1 * jax.random.normal(keys[3], (cout,), dtype)  # JAXBench: ones
    beta = 0.1 * jax.random.normal(keys[4], (cout,), dtype)  # JAXBench: zeros
    return (x, weight, conv_bias, gamma, beta), ()


def computation(x, weight, conv_bias, gamma, beta):
    y = jax.lax.conv_general_dilated(jnp.transpose(x, (0, 2, 3, 4, 1)), jnp.transpose(weight, (2, 3, 4, 1, 0)),
                                     (1, 1, 1), "VALID", dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))
    y = jnp.transpose(y + conv_bias, (0, 4, 1, 2, 3))  # NCDHW
    n, c, d, h, w = y.shape
    g = y.reshape(n, GROUPS, c // GROUPS, d, h, w)
    mean = jnp.mean(g, axis=(2, 3, 4, 5), keepdims=True)
    var = jnp.var(g, axis=(2, 3, 4, 5), keepdims=True)
    y = ((g - mean) / jnp.sqrt(var + EPS)).reshape(n, c, d, h, w)
    y = y * gamma[None, :, None, None, None] + beta[None, :, None, None, None]
    return jnp.mean(y, axis=(1, 2, 3, 4))


def get_flops():
    n, cin, d, h, w, cout, k = SIZES["full"]
    return 2 * n * cout * (d - k + 1) * (h - k + 1) * (w - k + 1) * cin * k**3
