"""1p_Flash_Attention: causal multi-head attention softmax(q k^T / sqrt(D), causal) v, layout [B, H, S, D]."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4, 64, 4096, 128), "small": (2, 8, 512, 128)}  # batch, heads, sequence, head_dim
MASKED = -1e9  # the score a future position gets before the softmax


def get_inputs(dtype=jnp.bfloat16, size="full", seed=42):
    b, h, s, d = SIZES[size]
    kq, kk, kv = jax.random.split(jax.random.key(seed), 3)
    q = jax.random.normal(kq, (b, h, s, d), dtype)
    k = jax.random.normal(kk, (b, h, s, d), dtype)
    v = jax.random.normal(kv, (b, h, s, d), dtype)
    return (q, k, v), ()


def computation(q, k, v):
    s, d = q.shape[2], q.shape[3]
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) * d**-0.5
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    probs = jax.nn.softmax(jnp.where(causal, scores, MASKED), axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", probs, v)


def get_flops():
    b, h, s, d = SIZES["full"]
    return 4 * b * h * s * s * d  # q k^T and p v over the whole S x S square, as JAXBench counts them
