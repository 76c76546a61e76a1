"""18k_Conv2D_ReLU_BiasAdd: relu(conv2d(x, W) + conv_bias) + bias, NCHW (KernelBench level 2 problem 1)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (128, 64, 128, 128, 128, 3), "small": (4, 64, 18, 18, 128, 3)}  # N, C_in, H, W, C_out, kernel


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    n, cin, h, w, cout, k = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 4)
    x = jax.random.uniform(keys[0], (n, cin, h, w), dtype)
    weight = (jax.random.normal(keys[1], (cout, cin, k, k), jnp.float32) / (cin * k * k) ** 0.5).astype(dtype)  # JAXBench: zeros
    conv_bias = jax.random.normal(keys[2], (cout,), dtype)  # JAXBench: zeros
    bias = jax.random.normal(keys[3], (cout, 1, 1), dtype)  # JAXBench: zeros
    return (x, weight, conv_bias, bias), ()


def computation(x, weight, conv_bias, bias):
    # NCHW in and out; the convolution runs in NHWC, as in JAXBench's reference
    y = jax.lax.conv_general_dilated(jnp.transpose(x, (0, 2, 3, 1)), jnp.transpose(weight, (2, 3, 1, 0)),
                                     (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = jax.nn.relu(y + conv_bias)
    return jnp.transpose(y, (0, 3, 1, 2)) + bias


def get_flops():
    n, cin, h, w, cout, k = SIZES["full"]
    return 2 * n * cout * (h - k + 1) * (w - k + 1) * cin * k * k
