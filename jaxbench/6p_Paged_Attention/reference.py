"""6p_Paged_Attention: single-token decode attention over a paged KV cache (GQA)."""
import math

import jax
import jax.numpy as jnp

# sequences, query heads, kv heads, head_dim, page size, pages per sequence (max length = pages * page size)
SIZES = {"full": (64, 32, 8, 128, 16, 256), "small": (8, 8, 2, 128, 16, 32)}


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, hq, hkv, d, page, pages_per_seq = SIZES[size]
    total_pages = b * pages_per_seq
    kq, kk, kv, kl, kp = jax.random.split(jax.random.key(seed), 5)
    q = jax.random.normal(kq, (b, hq, d), dtype)
    k_pages = jax.random.normal(kk, (hkv, total_pages, page, d), dtype)
    v_pages = jax.random.normal(kv, (hkv, total_pages, page, d), dtype)
    lengths = jax.random.randint(kl, (b,), 1, pages_per_seq * page + 1, dtype=jnp.int32)
    # Every sequence owns pages_per_seq distinct pages of the shared pool, scattered at random.
    page_indices = jax.random.permutation(kp, total_pages).astype(jnp.int32).reshape(b, pages_per_seq)
    return (q, k_pages, v_pages, lengths, page_indices), ()


def computation(q, k_pages, v_pages, lengths, page_indices):
    b, hq, d = q.shape
    hkv, _, page, _ = k_pages.shape
    g = hq // hkv
    max_len = page_indices.shape[1] * page
    # Gather each sequence's pages into a contiguous [Hkv, B, max_len, D] cache.
    k = k_pages[:, page_indices].reshape(hkv, b, max_len, d)
    v = v_pages[:, page_indices].reshape(hkv, b, max_len, d)
    qg = q.reshape(b, hkv, g, d)  # query head h reads kv head h // g
    scores = jnp.einsum("bhgd,hbtd->bhgt", qg, k, preferred_element_type=jnp.float32) / math.sqrt(d)
    valid = jnp.arange(max_len)[None, :] < lengths[:, None]  # [B, max_len]
    scores = jnp.where(valid[:, None, None, :], scores, -jnp.inf)
    probs = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bhgt,hbtd->bhgd", probs.astype(v.dtype), v, preferred_element_type=jnp.float32)
    return out.reshape(b, hq, d).astype(q.dtype)


def get_flops():
    # q k^T and p v over the valid tokens only, at the expected length (max_len + 1) / 2 of the
    # uniformly drawn lengths.
    b, hq, hkv, d, page, pages_per_seq = SIZES["full"]
    mean_len = (pages_per_seq * page + 1) / 2
    return int(2 * 2 * b * hq * d * mean_len)
