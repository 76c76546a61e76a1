"""1p_Flash_Attention: causal multi-head attention softmax(q k^T / sqrt(D)) v, layout [B, H, S, D]."""
import math

import jax
import jax.numpy as jnp

SIZES = {"full": (4, 64, 4096, 128), "small": (2, 8, 512, 128)}  # B, H, S, D
Q_CHUNK = 512  # query rows per step of the reference's lax.map


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, h, s, d = SIZES[size]
    kq, kk, kv = jax.random.split(jax.random.key(seed), 3)
    q = jax.random.normal(kq, (b, h, s, d), dtype)
    k = jax.random.normal(kk, (b, h, s, d), dtype)
    v = jax.random.normal(kv, (b, h, s, d), dtype)
    return (q, k, v), ()


def computation(q, k, v):
    b, h, s, d = q.shape
    scale = 1.0 / math.sqrt(d)
    chunk = min(Q_CHUNK, s)
    n = s // chunk
    # The full [B, H, S, S] f32 score tensor is 17 GiB at full size, more than a v5e holds,
    # so the reference walks over query chunks with lax.map (each chunk sees every key, masked).
    q_chunks = jnp.moveaxis(q.reshape(b, h, n, chunk, d), 2, 0)  # [n, B, H, chunk, D]
    k_pos = jnp.arange(s)

    def one_chunk(args):
        i, qc = args
        scores = jnp.einsum("bhqd,bhkd->bhqk", qc, k, preferred_element_type=jnp.float32) * scale
        q_pos = i * chunk + jnp.arange(chunk)
        causal = q_pos[:, None] >= k_pos[None, :]
        scores = jnp.where(causal, scores, -jnp.inf)
        probs = jax.nn.softmax(scores, axis=-1)
        out = jnp.einsum("bhqk,bhkd->bhqd", probs.astype(v.dtype), v, preferred_element_type=jnp.float32)
        return out.astype(q.dtype)

    out = jax.lax.map(one_chunk, (jnp.arange(n), q_chunks))  # [n, B, H, chunk, D]
    return jnp.moveaxis(out, 0, 2).reshape(b, h, s, d)


def get_flops():
    # Causal: only the lower triangle of q k^T and p v is useful, so half of the two S x S x D matmuls.
    b, h, s, d = SIZES["full"]
    return 2 * (2 * b * h * s * s * d) // 2
