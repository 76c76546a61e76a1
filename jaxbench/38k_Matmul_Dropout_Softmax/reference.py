"""38k_Matmul_Dropout_Softmax: softmax(dropout(x @ W + b), axis=1), dropout at inference (identity), float32."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features
DROPOUT_P = 0.2  # nn.Dropout(0.2) of the original module; identity in inference mode


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    m, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (m, k), jnp.float32).astype(dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    return (x, w, b), ()


def computation(x, w, b):
    y = x @ w + b                      # nn.Linear, W stored [in, out]
    # dropout: inference semantics, the identity (no mask, no 1/(1-p) rescale)
    return jax.nn.softmax(y, axis=1)   # softmax over the features of each row


def get_flops():
    m, k, n = SIZES["full"]
    return 2 * m * k * n
