"""15p_RetNet_Retention: multi-scale retention ((q k^T) * decay, normalised per query) v, one decay rate per head."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4, 16, 4096, 256), "small": (1, 4, 512, 256)}  # batch, heads, sequence, head_dim


def get_inputs(dtype=jnp.bfloat16, size="full", seed=42):
    b, h, s, d = SIZES[size]
    kq, kk, kv = jax.random.split(jax.random.key(seed), 3)
    shape = (b, h, s, d)
    return (jax.random.normal(kq, shape, dtype), jax.random.normal(kk, shape, dtype),
            jax.random.normal(kv, shape, dtype)), ()


def computation(q, k, v):
    h, s = q.shape[1], q.shape[2]
    gamma = 1.0 - jnp.exp2(-5.0 - jnp.arange(h, dtype=jnp.float32))  # per-head decay, ~0.97 to ~1
    pos = jnp.arange(s, dtype=jnp.float32)
    distance = pos[:, None] - pos[None, :]
    decay = jnp.exp(jnp.log(gamma)[:, None, None] * jnp.maximum(distance, 0.0)[None])  # gamma^(i-j), (H, S, S)
    decay = decay * (distance >= 0).astype(jnp.float32)[None]  # zero above the diagonal
    scores = jnp.einsum("bhsd,bhtd->bhst", q.astype(jnp.float32), k.astype(jnp.float32)) * decay[None]
    scores = scores / jnp.maximum(jnp.sum(jnp.abs(scores), axis=-1, keepdims=True), 1.0)
    return jnp.einsum("bhst,bhtd->bhsd", scores.astype(q.dtype), v)


def get_flops():
    b, h, s, d = SIZES["full"]
    return 4 * b * h * s * s * d
