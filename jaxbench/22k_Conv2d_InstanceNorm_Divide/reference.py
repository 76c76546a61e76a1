"""22k_Conv2d_InstanceNorm_Divide: InstanceNorm(conv2d(x, W) + b) / 2, NCHW (KernelBench level 2 problem 17)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (128, 64, 128, 128, 128, 3), "small": (4, 64, 18, 18, 128, 3)}  # N, C_in, H, W, C_out, kernel
EPS = 1e-5


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    n, cin, h, w, cout, k = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.uniform(keys[0], (n, cin, h, w), dtype)
    weight = (jax.random.normal(keys[1], (cout, cin, k, k), jnp.float32) / (cin * k * k) ** 0.5).astype(dtype)  # JAXBench: zeros
    conv_bias = 0.1 * jax.random.normal(keys[2], (cout,), dtype)  # JAXBench: zeros
    in_weight = 1.0 + 0.1 * jax.random.normal(keys[3], (cout,), dtype)  # JAXBench: ones
    in_bias = 0.1 * jax.random.normal(keys[4], (cout,), dtype)  # JAXBench: zeros
    return (x, weight, conv_bias, in_weight, in_bias), ()


def computation(x, weight, conv_bias, in_weight, in_bias):
    y = jax.lax.conv_general_dilated(jnp.transpose(x, (0, 2, 3, 1)), jnp.transpose(weight, (2, 3, 1, 0)),
                                     (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = jnp.transpose(y + conv_bias, (0, 3, 1, 2))
    mean = jnp.mean(y, axis=(2, 3), keepdims=True)
    var = jnp.var(y, axis=(2, 3), keepdims=True)
    y = (y - mean) / jnp.sqrt(var + EPS) * in_weight[None, :, None, None] + in_bias[None, :, None, None]
    return y / 2.0


def get_flops():
    n, cin, h, w, cout, k = SIZES["full"]
    return 2 * n * cout * (h - k + 1) * (w - k + 1) * cin * k * k
