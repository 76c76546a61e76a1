"""7p_Ragged_Paged_Attention: mixed prefill + decode attention over a paged KV cache with k and v pages combined."""
import jax
import jax.numpy as jnp

# batched tokens, sequences, q heads, kv heads, head_dim, page size, pages per sequence
SIZES = {"full": (4096, 64, 64, 8, 128, 16, 256), "small": (256, 4, 8, 2, 128, 16, 16)}
MASKED = -0.7 * float(jnp.finfo(jnp.float32).max)
PUBLISHED_SEED = 42  # the full-size inputs at this seed are JAXBench's: every sequence valid and full


def get_inputs(dtype=jnp.bfloat16, size="full", seed=PUBLISHED_SEED):
    tokens, seqs, hq, hkv, d, page, per_seq = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 5)
    pages = seqs * per_seq
    per_seq_tokens = tokens // seqs
    queries = jax.random.normal(keys[0], (tokens, hq, d), dtype)
    kv_pages = jax.random.normal(keys[1], (pages, page, 2 * hkv, d), dtype)  # k at even heads, v at odd
    if size == "full" and seed == PUBLISHED_SEED:
        kv_lens = jnp.full((seqs,), per_seq * page, jnp.int32)
        page_indices = jnp.arange(pages, dtype=jnp.int32).reshape(seqs, per_seq)
        num_seqs = jnp.array([seqs], jnp.int32)
    else:  # the check sets: uneven kv lengths (each holds its queries), scattered pages, trailing unused slots
        kv_lens = jax.random.randint(keys[2], (seqs,), per_seq_tokens, per_seq * page + 1, jnp.int32)
        page_indices = jax.random.permutation(keys[3], pages).astype(jnp.int32).reshape(seqs, per_seq)
        num_seqs = jax.random.randint(keys[4], (1,), max(seqs // 2, 1), seqs + 1, jnp.int32)
    cu_q_lens = jnp.arange(seqs + 1, dtype=jnp.int32) * per_seq_tokens
    return (queries, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs), ()


def computation(queries, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs):
    tokens, hq, d = queries.shape
    hkv = kv_pages.shape[2] // 2
    seqs = page_indices.shape[0]
    per_seq_tokens = tokens // seqs
    outputs = []
    for i in range(seqs):  # JAXBench's reference unrolls the sequences
        q = jax.lax.dynamic_slice(queries, (cu_q_lens[i], 0, 0), (per_seq_tokens, hq, d))
        pages = kv_pages[page_indices[i]]
        k = jnp.repeat(pages[:, :, 0::2, :].reshape(-1, hkv, d), hq // hkv, axis=1)
        v = jnp.repeat(pages[:, :, 1::2, :].reshape(-1, hkv, d), hq // hkv, axis=1)
        scores = jnp.einsum("qhd,khd->hqk", q, k, preferred_element_type=jnp.float32) * d**-0.5
        kv_len = kv_lens[i]
        q_pos = kv_len - per_seq_tokens + jax.lax.broadcasted_iota(jnp.int32, scores.shape, 1)
        k_pos = jax.lax.broadcasted_iota(jnp.int32, scores.shape, 2)
        scores = jnp.where((q_pos < k_pos) | (k_pos >= kv_len), MASKED, scores)
        probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
        out = jnp.einsum("hqk,khd->qhd", probs, v).astype(queries.dtype)
        outputs.append(jnp.where(i < num_seqs[0], out, 0.0))
    return jnp.concatenate(outputs, axis=0)


def get_flops():
    tokens, seqs, hq, _, d, page, per_seq = SIZES["full"]
    return seqs * hq * 4 * (tokens // seqs) * (per_seq * page) * d
