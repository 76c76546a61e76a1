"""31k_Gemm_BatchNorm_GELU_ReLU: relu(gelu(BatchNorm1d_train(x @ W + b))), float32."""
import math

import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features
EPS = 1e-5


def gelu(x):
    """Exact GELU as PyTorch writes it, 0.5 * x * (1 + erf(x / sqrt(2))).

    (jax.nn.gelu(approximate=False) goes through erfc, which makes XLA:TPU compile this
    fusion several times slower; the two agree to float32 rounding in absolute terms.)
    """
    return 0.5 * x * (1.0 + jax.lax.erf(x * (1.0 / math.sqrt(2.0))))


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    m, k, n = SIZES[size]
    kx, kw, kb, kg, kbeta = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.normal(kx, (m, k), jnp.float32).astype(dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    gamma = (1.0 + 0.1 * jax.random.normal(kg, (n,), jnp.float32)).astype(dtype)
    beta = (0.1 * jax.random.normal(kbeta, (n,), jnp.float32)).astype(dtype)
    return (x, w, b, gamma, beta), (EPS,)


def computation(x, w, b, gamma, beta, eps):
    y = x @ w + b                                   # nn.Linear, W stored [in, out]
    mean = jnp.mean(y, axis=0)                      # BatchNorm1d in training mode: batch statistics
    var = jnp.mean(jnp.square(y - mean), axis=0)    # biased variance
    y = (y - mean) * jax.lax.rsqrt(var + eps) * gamma + beta
    y = gelu(y)                                     # exact (erf) GELU, PyTorch's default
    return jax.nn.relu(y)


def get_flops():
    m, k, n = SIZES["full"]
    return 2 * m * k * n
