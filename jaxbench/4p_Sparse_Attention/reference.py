"""4p_Sparse_Attention: causal GQA attention in splash-attention layout, q [Hq, S, D], k, v [Hkv, S, D]."""
import jax
import jax.numpy as jnp

SIZES = {"full": (64, 8, 4096, 128), "small": (16, 2, 1024, 128)}  # q heads, kv heads, sequence, head_dim
MASKED = -1e30


def get_inputs(dtype=jnp.bfloat16, size="full", seed=42):
    hq, hkv, s, d = SIZES[size]
    kq, kk, kv = jax.random.split(jax.random.key(seed), 3)
    q = jax.random.normal(kq, (hq, s, d), dtype) * d**-0.5  # the softmax scale is folded into q
    k = jax.random.normal(kk, (hkv, s, d), dtype) * 0.02
    v = jax.random.normal(kv, (hkv, s, d), dtype) * 0.02
    return (q, k, v), ()


def computation(q, k, v):
    hq, s = q.shape[0], q.shape[1]
    group = hq // k.shape[0]
    k = jnp.repeat(k, group, axis=0)
    v = jnp.repeat(v, group, axis=0)
    scores = jnp.einsum("hqd,hkd->hqk", q, k)  # no scale here: q carries it
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    probs = jax.nn.softmax(jnp.where(causal[None], scores, MASKED), axis=-1)
    return jnp.einsum("hqk,hkd->hqd", probs, v)


def get_flops():
    hq, _, s, d = SIZES["full"]
    return 4 * hq * s * s * d
