import jax
import jax.numpy as jnp

SIZES = {"full": (2, 1024, 512, 4, 128), "small": (1, 128, 128, 2, 64)}


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, s, e, h, d = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.normal(keys[0], (b, s, e), dtype)
    wq, wk, wv = ((jax.random.normal(k, (e, h * d), jnp.float32) / e ** 0.5).astype(dtype) for k in keys[1:4])
    wo = (jax.random.normal(keys[4], (h * d, e), jnp.float32) / (h * d) ** 0.5).astype(dtype)
    return (x, wq, wk, wv, wo), (h,)


def computation(x, wq, wk, wv, wo, h):
    b, s, _ = x.shape
    d = wq.shape[1] // h
    q, k, v = ((x @ w).reshape(b, s, h, d) for w in (wq, wk, wv))
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) * d ** -0.5
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    probs = jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, s, h * d) @ wo
