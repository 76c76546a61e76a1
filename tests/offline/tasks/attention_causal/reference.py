import math

import jax
import jax.numpy as jnp

SIZES = {"full": (2, 16, 4096, 128), "small": (1, 2, 512, 128)}  # B, H, S, D


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, h, s, d = SIZES[size]
    kq, kk, kv = jax.random.split(jax.random.key(seed), 3)
    return tuple(jax.random.normal(key, (b, h, s, d), dtype) for key in (kq, kk, kv)), ()


def computation(q, k, v):
    s = q.shape[2]
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k).astype(jnp.float32) / math.sqrt(q.shape[-1])
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    scores = jnp.where(causal, scores, jnp.finfo(jnp.float32).min)
    scores = scores - jnp.max(scores, axis=-1, keepdims=True)
    weights = jnp.exp(scores)
    weights = weights / jnp.sum(weights, axis=-1, keepdims=True)
    return jnp.einsum("bhqk,bhkd->bhqd", weights.astype(v.dtype), v)


def get_flops():
    b, h, s, d = SIZES["full"]
    return 2 * 2 * b * h * s * s * d // 2
