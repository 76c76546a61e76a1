"""7p_Ragged_Paged_Attention: a mixed prefill + decode batch of query tokens over a paged KV cache (GQA)."""
import functools
import math

import jax
import jax.numpy as jnp

# query tokens, sequences, of which decode (1 token each), query heads, kv heads, head_dim, page size,
# pages per sequence (max kv length = pages * page size).
SIZES = {"full": (4096, 56, 48, 32, 8, 128, 16, 256), "small": (256, 16, 14, 8, 2, 128, 16, 16)}
TOKEN_CHUNK = 128  # query tokens per step of the reference's lax.map


def _lengths(key, size):
    """(q_lens, kv_lens) [num_seqs] int32: decode and prefill sequences in random order."""
    t, seqs, n_dec, *_, page, pages_per_seq = SIZES[size]
    n_pre = seqs - n_dec
    k_split, k_perm, k_ctx = jax.random.split(key, 3)
    # Split the prefill tokens into n_pre chunks of at least one token each, at random proportions.
    spare = t - n_dec - n_pre
    weights = jax.random.uniform(k_split, (n_pre,), minval=0.05, maxval=1.0)
    extra = jnp.floor(weights / weights.sum() * spare).astype(jnp.int32)
    extra = extra.at[-1].add(spare - extra.sum())
    q_lens = jnp.concatenate([jnp.ones((n_dec,), jnp.int32), 1 + extra])
    q_lens = q_lens[jnp.argsort(jax.random.uniform(k_perm, (seqs,)))]  # random order
    # Context already in the cache before this step's tokens: 0 .. max_kv - q_len.
    ctx = jax.random.randint(k_ctx, (seqs,), 0, pages_per_seq * page - q_lens + 1, dtype=jnp.int32)
    return q_lens, q_lens + ctx


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    return _make_inputs(jax.random.key(seed), jnp.dtype(dtype), size), ()


@functools.partial(jax.jit, static_argnums=(1, 2))
def _make_inputs(key, dtype, size):
    t, seqs, n_dec, hq, hkv, d, page, pages_per_seq = SIZES[size]
    total_pages = seqs * pages_per_seq
    kq, kk, kv, kl, kp = jax.random.split(key, 5)
    q = jax.random.normal(kq, (t, hq, d), dtype)
    k_pages = jax.random.normal(kk, (total_pages, page, hkv, d), dtype)
    v_pages = jax.random.normal(kv, (total_pages, page, hkv, d), dtype)
    q_lens, kv_lens = _lengths(kl, size)
    cu_q_lens = jnp.concatenate([jnp.zeros((1,), jnp.int32), jnp.cumsum(q_lens).astype(jnp.int32)])
    # Every sequence owns pages_per_seq distinct pages of the shared pool, scattered at random.
    page_indices = jnp.argsort(jax.random.uniform(kp, (total_pages,))).astype(jnp.int32).reshape(seqs, pages_per_seq)
    return q, k_pages, v_pages, kv_lens, page_indices, cu_q_lens


def computation(q, k_pages, v_pages, kv_lens, page_indices, cu_q_lens):
    t, hq, d = q.shape
    _, page, hkv, _ = k_pages.shape
    g = hq // hkv
    max_len = page_indices.shape[1] * page
    tokens = jnp.arange(t)
    # Sequence of each query token, and its position in that sequence: the q_len new tokens are the
    # last q_len of the sequence's kv_len cached tokens.
    seq = jnp.sum(tokens[:, None] >= cu_q_lens[None, 1:], axis=1)
    q_pos = kv_lens[seq] - (cu_q_lens[seq + 1] - tokens)
    chunk = min(TOKEN_CHUNK, t)
    n = t // chunk
    # Each token gathers its own sequence's pages; lax.map over token chunks keeps that in HBM.
    xs = (q.reshape(n, chunk, hkv, g, d), seq.reshape(n, chunk), q_pos.reshape(n, chunk))

    def one_chunk(args):
        qc, sc, pc = args
        pages = page_indices[sc]  # [chunk, pages_per_seq]
        k = k_pages[pages].reshape(chunk, max_len, hkv, d).transpose(0, 2, 1, 3)  # [chunk, Hkv, max_len, D]
        v = v_pages[pages].reshape(chunk, max_len, hkv, d).transpose(0, 2, 1, 3)
        scores = jnp.einsum("thgd,thld->thgl", qc, k, preferred_element_type=jnp.float32) / math.sqrt(d)
        causal = jnp.arange(max_len)[None, :] <= pc[:, None]  # [chunk, max_len]
        scores = jnp.where(causal[:, None, None, :], scores, -jnp.inf)
        probs = jax.nn.softmax(scores, axis=-1)
        out = jnp.einsum("thgl,thld->thgd", probs.astype(v.dtype), v, preferred_element_type=jnp.float32)
        return out.astype(q.dtype)

    return jax.lax.map(one_chunk, xs).reshape(t, hq, d)


def get_flops():
    # q k^T and p v over the tokens each query really attends to (causal inside its sequence). Token i
    # of a chunk sees kv_len - q_len + i + 1 tokens; with the context drawn uniformly from
    # 0 .. max_kv - q_len that is q_len * (max_kv + 1) / 2 per sequence on average, whatever the split,
    # so T * (max_kv + 1) / 2 attended (query, key) pairs per head.
    t, seqs, n_dec, hq, hkv, d, page, pages_per_seq = SIZES["full"]
    attended = t * (pages_per_seq * page + 1) / 2
    return int(2 * 2 * hq * d * attended)
