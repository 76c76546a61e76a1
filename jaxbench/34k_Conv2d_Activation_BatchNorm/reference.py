"""34k_Conv2d_Activation_BatchNorm: BatchNorm2d_train(mish(conv2d(x, W) + b)), NHWC / HWIO, float32."""
import jax
import jax.numpy as jnp

# batch, in_channels, out_channels, height, width, kernel_size
SIZES = {"full": (64, 64, 128, 128, 128, 3), "small": (2, 64, 128, 32, 32, 3)}
EPS = 1e-5


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    n, cin, cout, h, w, k = SIZES[size]
    kx, kw, kb, kg, kbeta = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.normal(kx, (n, h, w, cin), jnp.float32).astype(dtype)
    wgt = (jax.random.normal(kw, (k, k, cin, cout), jnp.float32) / jnp.sqrt(cin * k * k)).astype(dtype)
    b = (0.1 * jax.random.normal(kb, (cout,), jnp.float32)).astype(dtype)
    gamma = (1.0 + 0.1 * jax.random.normal(kg, (cout,), jnp.float32)).astype(dtype)
    beta = (0.1 * jax.random.normal(kbeta, (cout,), jnp.float32)).astype(dtype)
    return (x, wgt, b, gamma, beta), (EPS,)


def computation(x, w, b, gamma, beta, eps):
    y = jax.lax.conv_general_dilated(
        x, w, window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NHWC", "HWIO", "NHWC")) + b
    y = jnp.tanh(jax.nn.softplus(y)) * y                  # the "activation": Mish
    mean = jnp.mean(y, axis=(0, 1, 2))                    # BatchNorm2d, training mode: batch statistics
    var = jnp.mean(jnp.square(y - mean), axis=(0, 1, 2))  # biased variance
    return (y - mean) * jax.lax.rsqrt(var + eps) * gamma + beta


def get_flops():
    n, cin, cout, h, w, k = SIZES["full"]
    return 2 * n * (h - k + 1) * (w - k + 1) * cout * cin * k * k
