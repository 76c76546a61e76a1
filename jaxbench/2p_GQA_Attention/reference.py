"""2p_GQA_Attention: causal grouped-query attention, q [B, S, Hq, D] and k, v [B, S, Hkv, D] (Llama-3.1-405B)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4, 4096, 128, 8, 128), "small": (1, 512, 16, 2, 128)}  # batch, seq, q heads, kv heads, head_dim
MASKED = -1e9


def get_inputs(dtype=jnp.bfloat16, size="full", seed=42):
    b, s, hq, hkv, d = SIZES[size]
    kq, kk, kv = jax.random.split(jax.random.key(seed), 3)
    q = jax.random.normal(kq, (b, s, hq, d), dtype)
    k = jax.random.normal(kk, (b, s, hkv, d), dtype)
    v = jax.random.normal(kv, (b, s, hkv, d), dtype)
    return (q, k, v), ()


def computation(q, k, v):
    s, hq, d = q.shape[1], q.shape[2], q.shape[3]
    group = hq // k.shape[2]  # query head j reads kv head j // group
    k = jnp.repeat(k, group, axis=2)
    v = jnp.repeat(v, group, axis=2)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) * d**-0.5
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    probs = jax.nn.softmax(jnp.where(causal, scores, MASKED), axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", probs, v)


def get_flops():
    b, s, hq, _, d = SIZES["full"]
    return 4 * b * hq * s * s * d
