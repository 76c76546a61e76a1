"""5p_Flex_Attention: causal attention with a learned relative-position bias added to the scores (flex attention)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4, 64, 4096, 128), "small": (2, 4, 512, 128)}  # batch, heads, sequence, head_dim
MASKED = -1e30


def get_inputs(dtype=jnp.bfloat16, size="full", seed=42):
    b, h, s, d = SIZES[size]
    kq, kk, kv, kb = jax.random.split(jax.random.key(seed), 4)
    q = jax.random.normal(kq, (b, h, s, d), dtype)
    k = jax.random.normal(kk, (b, h, s, d), dtype) * 0.02
    v = jax.random.normal(kv, (b, h, s, d), dtype) * 0.02
    bias = jax.random.normal(kb, (h, s, s), dtype) * 0.01  # per head, per (query, key) position
    return (q, k, v, bias), ()


def computation(q, k, v, bias):
    s, d = q.shape[2], q.shape[3]
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) * d**-0.5
    scores = scores + bias[None]  # the score modification
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    probs = jax.nn.softmax(jnp.where(causal, scores, MASKED), axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", probs, v)


def get_flops():
    b, h, s, d = SIZES["full"]
    return 4 * b * h * s * s * d + b * h * s * s  # the two matmuls and the bias add
