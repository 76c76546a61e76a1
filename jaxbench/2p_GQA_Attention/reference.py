"""2p_GQA_Attention: causal grouped-query attention, layout [B, S, H, D]."""
import math

import jax
import jax.numpy as jnp

# B, S, query heads, kv heads, D. Group size (query heads per kv head) is 16 at both sizes.
SIZES = {"full": (4, 4096, 128, 8, 128), "small": (1, 512, 32, 2, 128)}
Q_CHUNK = 256  # query rows per step of the reference's lax.map


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, s, hq, hkv, d = SIZES[size]
    kq, kk, kv = jax.random.split(jax.random.key(seed), 3)
    q = jax.random.normal(kq, (b, s, hq, d), dtype)
    k = jax.random.normal(kk, (b, s, hkv, d), dtype)
    v = jax.random.normal(kv, (b, s, hkv, d), dtype)
    return (q, k, v), ()


def computation(q, k, v):
    b, s, hq, d = q.shape
    hkv = k.shape[2]
    g = hq // hkv
    scale = 1.0 / math.sqrt(d)
    chunk = min(Q_CHUNK, s)
    n = s // chunk
    # Query head h uses kv head h // g. The [B, Hq, S, S] f32 scores would be 34 GiB at full
    # size, so the reference walks over query chunks with lax.map (each chunk sees every key, masked).
    q_chunks = jnp.moveaxis(q.reshape(b, n, chunk, hkv, g, d), 1, 0)  # [n, B, chunk, Hkv, G, D]
    k_pos = jnp.arange(s)

    def one_chunk(args):
        i, qc = args
        scores = jnp.einsum("bqhgd,bkhd->bhgqk", qc, k, preferred_element_type=jnp.float32) * scale
        q_pos = i * chunk + jnp.arange(chunk)
        causal = q_pos[:, None] >= k_pos[None, :]
        scores = jnp.where(causal, scores, -jnp.inf)
        probs = jax.nn.softmax(scores, axis=-1)
        out = jnp.einsum("bhgqk,bkhd->bqhgd", probs.astype(v.dtype), v, preferred_element_type=jnp.float32)
        return out.astype(q.dtype)

    out = jax.lax.map(one_chunk, (jnp.arange(n), q_chunks))  # [n, B, chunk, Hkv, G, D]
    return jnp.moveaxis(out, 0, 1).reshape(b, s, hq, d)


def get_flops():
    # Causal: only the lower triangle is useful, so half of the two S x S x D matmuls per query head.
    b, s, hq, hkv, d = SIZES["full"]
    return 2 * (2 * b * hq * s * s * d) // 2
