"""36k_Matmul_Sigmoid_Sum: sum(sigmoid(x @ W + b), axis=1, keepdims=True), float32."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, input_size, hidden_size


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    m, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (m, k), jnp.float32).astype(dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    return (x, w, b), ()


def computation(x, w, b):
    y = jax.nn.sigmoid(x @ w + b)               # nn.Linear (W stored [in, out]) + sigmoid
    return jnp.sum(y, axis=1, keepdims=True)    # [batch, 1]


def get_flops():
    m, k, n = SIZES["full"]
    return 2 * m * k * n
