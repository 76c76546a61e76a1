"""6p_Paged_Attention: decode attention over a paged KV cache, one query token per sequence, GQA (Llama-3.1-70B)."""
import jax
import jax.numpy as jnp

# sequences, q heads, kv heads, head_dim, page size, pages per sequence
SIZES = {"full": (64, 64, 8, 128, 16, 256), "small": (8, 8, 2, 128, 16, 32)}
MASKED = -1e30
PUBLISHED_SEED = 42  # the full-size inputs at this seed are JAXBench's: every sequence full, pages in order


def get_inputs(dtype=jnp.bfloat16, size="full", seed=PUBLISHED_SEED):
    n, hq, hkv, d, page, per_seq = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 5)
    pages = n * per_seq
    queries = jax.random.normal(keys[0], (n, hq, d), dtype)
    k_pages = jax.random.normal(keys[1], (pages, page, hkv, d), dtype) * 0.02
    v_pages = jax.random.normal(keys[2], (pages, page, hkv, d), dtype) * 0.02
    if size == "full" and seed == PUBLISHED_SEED:
        kv_lens = jnp.full((n,), per_seq * page, jnp.int32)
        page_indices = jnp.arange(pages, dtype=jnp.int32).reshape(n, per_seq)
    else:  # the check sets: uneven lengths, pages scattered over the cache
        kv_lens = jax.random.randint(keys[3], (n,), 1, per_seq * page + 1, jnp.int32)
        page_indices = jax.random.permutation(keys[4], pages).astype(jnp.int32).reshape(n, per_seq)
    cu_q_lens = jnp.arange(n + 1, dtype=jnp.int32)  # one query token per sequence
    return (queries, k_pages, v_pages, kv_lens, page_indices, cu_q_lens), ()


def computation(queries, k_pages, v_pages, kv_lens, page_indices, cu_q_lens):
    n, hq, d = queries.shape
    page, hkv = k_pages.shape[1], k_pages.shape[2]
    max_len = page_indices.shape[1] * page
    group = hq // hkv

    def one_sequence(i):
        q = jax.lax.dynamic_slice(queries, (cu_q_lens[i], 0, 0), (1, hq, d))
        k = jnp.repeat(k_pages[page_indices[i]].reshape(max_len, hkv, d), group, axis=1)
        v = jnp.repeat(v_pages[page_indices[i]].reshape(max_len, hkv, d), group, axis=1)
        scores = jnp.einsum("qhd,khd->hqk", q, k) * d**-0.5
        valid = jnp.arange(max_len) < kv_lens[i]
        probs = jax.nn.softmax(jnp.where(valid[None, None, :], scores, MASKED), axis=-1)
        return jnp.einsum("hqk,khd->qhd", probs, v)[0]

    return jax.vmap(one_sequence)(jnp.arange(n))


def get_flops():
    n, hq, _, d, page, per_seq = SIZES["full"]
    return n * hq * 4 * (per_seq * page) * d
