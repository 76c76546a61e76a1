"""37k_Matmul_Swish_Scaling: swish(x @ W + b) * s, float32."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features
SCALING_FACTOR = 2.0


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    m, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (m, k), jnp.float32).astype(dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    return (x, w, b), (SCALING_FACTOR,)


def computation(x, w, b, scaling_factor):
    y = x @ w + b                   # nn.Linear, W stored [in, out]
    y = y * jax.nn.sigmoid(y)       # Swish
    return y * scaling_factor


def get_flops():
    m, k, n = SIZES["full"]
    return 2 * m * k * n
