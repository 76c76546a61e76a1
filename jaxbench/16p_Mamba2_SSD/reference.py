"""16p_Mamba2_SSD: Mamba-2 state-space duality in its quadratic (attention-like) form with a cumulative decay mask."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4, 64, 4096, 64), "small": (1, 4, 512, 64)}  # batch, heads, sequence, head_dim


def get_inputs(dtype=jnp.bfloat16, size="full", seed=42):
    b, h, s, d = SIZES[size]
    kc, kb, kx, ka = jax.random.split(jax.random.key(seed), 4)
    c = jax.random.normal(kc, (b, h, s, d), dtype)  # C, the output projection (the "query")
    bb = jax.random.normal(kb, (b, h, s, d), dtype)  # B, the input projection (the "key")
    x = jax.random.normal(kx, (b, h, s, d), dtype)  # the hidden state (the "value")
    a_log = jax.random.normal(ka, (b, h, s), jnp.float32) * 0.5 - 4.0
    return (c, bb, x, a_log), ()


def computation(c, b, x, a_log):
    s = c.shape[2]
    log_a = jnp.cumsum(jnp.log(jax.nn.sigmoid(a_log) + 1e-8), axis=-1)  # (B, H, S)
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    decay = jnp.exp(jnp.where(causal, log_a[..., :, None] - log_a[..., None, :], -1e30))  # L[i, j]
    scores = jnp.einsum("bhsd,bhtd->bhst", c.astype(jnp.float32), b.astype(jnp.float32)) * decay
    total = jnp.sum(scores, axis=-1, keepdims=True)
    total = jnp.where(jnp.abs(total) < 1e-6, 1.0, total)
    scores = scores / jnp.maximum(jnp.abs(total), 1.0)
    return jnp.einsum("bhst,bhtd->bhsd", scores.astype(c.dtype), x)


def get_flops():
    b, h, s, d = SIZES["full"]
    return 4 * b * h * s * s * d
