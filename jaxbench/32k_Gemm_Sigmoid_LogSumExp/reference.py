"""32k_Gemm_Sigmoid_LogSumExp: logsumexp(sigmoid(x @ W1 + b1) @ W2 + b2, axis=1), float32."""
import jax
import jax.numpy as jnp

# batch, input_size, hidden_size, output_size
SIZES = {"full": (4096, 8192, 8192, 8192), "small": (256, 512, 384, 384)}


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    m, k, h, n = SIZES[size]
    kx, kw1, kb1, kw2, kb2 = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.normal(kx, (m, k), jnp.float32).astype(dtype)
    w1 = (jax.random.normal(kw1, (k, h), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    b1 = (0.1 * jax.random.normal(kb1, (h,), jnp.float32)).astype(dtype)
    # sigmoid outputs lie in (0, 1) with std ~0.2 across rows: a larger W2 scale (logit std ~2)
    # keeps the per-row logsumexp clearly row-dependent while staying O(10)
    w2 = (jax.random.normal(kw2, (h, n), jnp.float32) * (4.0 / jnp.sqrt(h))).astype(dtype)
    b2 = (0.1 * jax.random.normal(kb2, (n,), jnp.float32)).astype(dtype)
    return (x, w1, b1, w2, b2), ()


def computation(x, w1, b1, w2, b2):
    h = jax.nn.sigmoid(x @ w1 + b1)              # linear1 + sigmoid, W stored [in, out]
    logits = h @ w2 + b2                         # linear2
    return jax.nn.logsumexp(logits, axis=1)      # [batch]


def get_flops():
    m, k, h, n = SIZES["full"]
    return 2 * m * k * h + 2 * m * h * n
