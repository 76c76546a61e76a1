"""33k_Conv3d_Mish_Tanh: tanh(mish(conv3d(x, W) + b)), NDHWC / DHWIO, float32."""
import jax
import jax.numpy as jnp

# batch, in_channels, out_channels, depth, height, width, kernel_size
SIZES = {"full": (16, 32, 64, 32, 64, 64, 3), "small": (2, 16, 32, 8, 16, 16, 3)}


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    n, cin, cout, d, h, w, k = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (n, d, h, w, cin), jnp.float32).astype(dtype)
    fan_in = cin * k ** 3
    wgt = (jax.random.normal(kw, (k, k, k, cin, cout), jnp.float32) / jnp.sqrt(fan_in)).astype(dtype)
    b = (0.1 * jax.random.normal(kb, (cout,), jnp.float32)).astype(dtype)
    return (x, wgt, b), ()


def computation(x, w, b):
    y = jax.lax.conv_general_dilated(
        x, w, window_strides=(1, 1, 1), padding="VALID",
        dimension_numbers=("NDHWC", "DHWIO", "NDHWC")) + b
    y = y * jnp.tanh(jax.nn.softplus(y))   # Mish
    return jnp.tanh(y)


def get_flops():
    n, cin, cout, d, h, w, k = SIZES["full"]
    return 2 * n * (d - k + 1) * (h - k + 1) * (w - k + 1) * cout * cin * k ** 3
