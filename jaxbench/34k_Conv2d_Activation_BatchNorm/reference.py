"""34k_Conv2d_Activation_BatchNorm: BatchNorm_train(mish(conv2d(x, W) + b)), NCHW (KernelBench level 2 problem 52)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (64, 64, 128, 128, 128, 3), "small": (2, 64, 18, 18, 128, 3)}  # N, C_in, H, W, C_out, kernel
EPS = 1e-5


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    n, cin, h, w, cout, k = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.uniform(keys[0], (n, cin, h, w), dtype)
    weight = jax.random.normal(keys[1], (cout, cin, k, k), dtype)
    conv_bias = jax.random.normal(keys[2], (cout,), dtype)
    bn_weight = 1.0 + 0.1 * jax.random.normal(keys[3], (cout,), dtype)  # JAXBench: ones
    bn_bias = 0.1 * jax.random.normal(keys[4], (cout,), dtype)  # JAXBench: zeros
    return (x, weight, conv_bias, bn_weight, bn_bias), ()


def computation(x, weight, conv_bias, bn_weight, bn_bias):
    y = jax.lax.conv_general_dilated(jnp.transpose(x, (0, 2, 3, 1)), jnp.transpose(weight, (2, 3, 1, 0)),
                                     (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = jnp.transpose(y + conv_bias, (0, 3, 1, 2))
    y = jnp.tanh(jax.nn.softplus(y)) * y  # mish
    mean = jnp.mean(y, axis=(0, 2, 3), keepdims=True)  # training-mode BatchNorm over N, H, W
    var = jnp.mean((y - mean) ** 2, axis=(0, 2, 3), keepdims=True)
    return (y - mean) / jnp.sqrt(var + EPS) * bn_weight[None, :, None, None] + bn_bias[None, :, None, None]


def get_flops():
    n, cin, h, w, cout, k = SIZES["full"]
    return 2 * n * cout * (h - k + 1) * (w - k + 1) * cin * k * k
