"""39k_Conv2d_GELU_GlobalAvgPool: mean over H, W of gelu(conv2d(x, W) + b) (KernelBench level 2 problem 67)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (128, 8, 256, 256, 64, 3), "small": (4, 8, 34, 34, 64, 3)}  # N, C_in, H, W, C_out, kernel


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    n, cin, h, w, cout, k = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(keys[0], (n, cin, h, w), dtype)
    weight = (jax.random.normal(keys[1], (cout, cin, k, k), jnp.float32) / (cin * k * k) ** 0.5).astype(dtype)  # JAXBench: zeros
    bias = jax.random.normal(keys[2], (cout,), dtype)  # JAXBench: zeros
    return (x, weight, bias), ()


def computation(x, weight, bias):
    y = jax.lax.conv_general_dilated(jnp.transpose(x, (0, 2, 3, 1)), jnp.transpose(weight, (2, 3, 1, 0)),
                                     (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jnp.mean(jax.nn.gelu(y + bias), axis=(1, 2))


def get_flops():
    n, cin, h, w, cout, k = SIZES["full"]
    return 2 * n * cout * (h - k + 1) * (w - k + 1) * cin * k * k
