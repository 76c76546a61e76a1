import jax
import jax.numpy as jnp

# sequences, q heads, kv heads, head_dim, page rows, pages per sequence
SIZES = {"full": (4, 32, 8, 128, 16, 128), "small": (3, 8, 2, 128, 16, 8)}


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    n, hq, hkv, d, page, per_seq = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 5)
    q = jax.random.normal(keys[0], (n, hq, d), dtype)
    k_pages = jax.random.normal(keys[1], (n * per_seq, page, hkv, d), dtype)
    v_pages = jax.random.normal(keys[2], (n * per_seq, page, hkv, d), dtype)
    lengths = jax.random.randint(keys[3], (n,), 1, per_seq * page + 1, jnp.int32)  # uneven, at least one key
    table = jax.random.permutation(keys[4], n * per_seq).astype(jnp.int32).reshape(n, per_seq)  # scattered pages
    return (q, k_pages, v_pages, lengths, table), ()


def computation(q, k_pages, v_pages, lengths, table):
    n, hq, d = q.shape
    page, hkv = k_pages.shape[1], k_pages.shape[2]
    keys = table.shape[1] * page

    def one_sequence(qi, length, pages):
        k = jnp.repeat(k_pages[pages].reshape(keys, hkv, d), hq // hkv, axis=1)
        v = jnp.repeat(v_pages[pages].reshape(keys, hkv, d), hq // hkv, axis=1)
        scores = jnp.einsum("qhd,khd->hqk", qi[None], k) * d ** -0.5  # one query token
        scores = jnp.where(jnp.arange(keys)[None, None, :] < length, scores, -1e30)
        return jnp.einsum("hqk,khd->qhd", jax.nn.softmax(scores, axis=-1), v)[0]

    return jax.vmap(one_sequence)(q, lengths, table)
