"""5p_Flex_Attention: bidirectional attention with an additive per-head score bias [H, S, S], layout [B, H, S, D]."""
import math

import jax
import jax.numpy as jnp

SIZES = {"full": (8, 32, 2048, 64), "small": (2, 4, 512, 64)}  # B, H, S, D
Q_CHUNK = 512  # query rows per step of the reference's lax.map


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, h, s, d = SIZES[size]
    kq, kk, kv, kb = jax.random.split(jax.random.key(seed), 4)
    q = jax.random.normal(kq, (b, h, s, d), dtype)
    k = jax.random.normal(kk, (b, h, s, d), dtype)
    v = jax.random.normal(kv, (b, h, s, d), dtype)
    bias = jax.random.normal(kb, (h, s, s), dtype)  # an arbitrary learned bias, shared over the batch
    return (q, k, v, bias), ()


def computation(q, k, v, bias):
    b, h, s, d = q.shape
    scale = 1.0 / math.sqrt(d)
    chunk = min(Q_CHUNK, s)
    n = s // chunk
    # Query chunks with lax.map, so the f32 scores stay small at full size.
    q_chunks = jnp.moveaxis(q.reshape(b, h, n, chunk, d), 2, 0)  # [n, B, H, chunk, D]
    bias_chunks = jnp.moveaxis(bias.reshape(h, n, chunk, s), 1, 0)  # [n, H, chunk, S]

    def one_chunk(args):
        qc, bc = args
        scores = jnp.einsum("bhqd,bhkd->bhqk", qc, k, preferred_element_type=jnp.float32) * scale
        scores = scores + bc.astype(jnp.float32)[None]
        probs = jax.nn.softmax(scores, axis=-1)
        out = jnp.einsum("bhqk,bhkd->bhqd", probs.astype(v.dtype), v, preferred_element_type=jnp.float32)
        return out.astype(q.dtype)

    out = jax.lax.map(one_chunk, (q_chunks, bias_chunks))  # [n, B, H, chunk, D]
    return jnp.moveaxis(out, 0, 2).reshape(b, h, s, d)


def get_flops():
    # Bidirectional (no mask): the full S x S x D products q k^T and p v.
    b, h, s, d = SIZES["full"]
    return 2 * (2 * b * h * s * s * d)
