import jax
import jax.numpy as jnp

SIZES = {"full": (32, 64, 56, 56, 128), "small": (2, 16, 8, 8, 32)}
EPS = 1e-5


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    n, cin, h, w, cout = SIZES[size]
    kx, kw, kg, kb = jax.random.split(jax.random.key(seed), 4)
    x = jax.random.normal(kx, (n, cin, h, w), dtype)
    weight = (jax.random.normal(kw, (cout, cin, 3, 3), jnp.float32) / (3 * cin ** 0.5)).astype(dtype)
    gamma = (1.0 + 0.1 * jax.random.normal(kg, (cout,), jnp.float32)).astype(dtype)
    beta = (0.1 * jax.random.normal(kb, (cout,), jnp.float32)).astype(dtype)
    return (x, weight, gamma, beta), ()


def computation(x, weight, gamma, beta):
    y = jax.lax.conv(x, weight, window_strides=(1, 1), padding="SAME")
    # BatchNorm in training mode: statistics over the batch and both spatial axes, per channel.
    mean = jnp.mean(y, axis=(0, 2, 3), keepdims=True)
    var = jnp.mean(jnp.square(y - mean), axis=(0, 2, 3), keepdims=True)
    y = (y - mean) * jax.lax.rsqrt(var + EPS) * gamma[None, :, None, None] + beta[None, :, None, None]
    return jax.nn.relu(y)
