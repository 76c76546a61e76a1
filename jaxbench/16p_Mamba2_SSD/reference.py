"""16p_Mamba2_SSD: Mamba-2 state-space duality (SSD) scan, chunked form (chunk 256), float32 inside."""
import math

import jax
import jax.numpy as jnp

SIZES = {"full": (8, 2048, 80, 64, 1, 128), "small": (2, 1024, 8, 64, 1, 128)}  # batch, seq, heads, head_dim, groups, d_state
CHUNK = 256


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, seq, h, p, g, n = SIZES[size]
    kx, kt, kb, kd, ka, kB, kC = jax.random.split(jax.random.key(seed), 7)
    x = jax.random.normal(kx, (b, seq, h, p), dtype)
    # dt = softplus(dt_raw + dt_bias) with the bias set so that softplus(bias) is log-uniform in
    # [1e-3, 1e-1] per head (Mamba-2's init); dt and A stay float32 as in the model.
    dt0 = jnp.exp(jax.random.uniform(kb, (h,), jnp.float32, math.log(1e-3), math.log(1e-1)))
    dt_bias = dt0 + jnp.log(-jnp.expm1(-dt0))  # inverse softplus
    dt = jax.nn.softplus(dt_bias + 0.5 * jax.random.normal(kt, (b, seq, h), jnp.float32))
    a = -jax.random.uniform(ka, (h,), jnp.float32, 1.0, 16.0)  # A = -exp(A_log), A_log init in [log 1, log 16]
    bmat = jax.random.normal(kB, (b, seq, g, n), dtype)
    cmat = jax.random.normal(kC, (b, seq, g, n), dtype)
    return (x, dt, a, bmat, cmat), ()


def _segsum(cs):
    """Running sums cs [..., T] of x -> [..., T, T]: cs[i] - cs[j] = x[j+1] + ... + x[i] for i >= j, -inf above."""
    t = cs.shape[-1]
    seg = cs[..., :, None] - cs[..., None, :]
    return jnp.where(jnp.tril(jnp.ones((t, t), bool)), seg, -jnp.inf)


def computation(x, dt, a, bmat, cmat):
    b, seq, h, p = x.shape
    g, n = bmat.shape[2:]
    c, q, j = seq // CHUNK, CHUNK, h // g  # chunks, chunk length, heads per group
    f32 = jnp.float32
    xs = (x.astype(f32) * dt[..., None]).reshape(b, c, q, g, j, p)  # discretised input X * dt
    da = (a * dt).reshape(b, c, q, g, j).transpose(0, 3, 4, 1, 2)  # A * dt: [b, g, j, c, q]
    bs = bmat.astype(f32).reshape(b, c, q, g, n)
    cs = cmat.astype(f32).reshape(b, c, q, g, n)
    da_cum = jnp.cumsum(da, axis=-1)

    # 1. within each chunk (the diagonal blocks): a masked, decayed attention-like product
    decay = jnp.exp(_segsum(da_cum)).transpose(0, 3, 1, 2, 4, 5)  # [b, c, g, j, q(seq), q(s)]
    cb = jnp.einsum("bclgn,bcsgn->bcgls", cs, bs)
    y_diag = jnp.einsum("bcgjls,bcsgjp->bclgjp", cb[:, :, :, None] * decay, xs)

    # 2. the state each chunk leaves behind
    decay_states = jnp.exp(da_cum[..., -1:] - da_cum).transpose(0, 3, 4, 1, 2)  # [b, c, q, g, j]
    states = jnp.einsum("bclgn,bclgjp->bcgjpn", bs, xs * decay_states[..., None])

    # 3. the recurrence across chunks (starting from a zero state)
    states = jnp.concatenate([jnp.zeros_like(states[:, :1]), states], axis=1)
    decay_chunk = jnp.exp(_segsum(jnp.cumsum(jnp.pad(da_cum[..., -1], [(0, 0)] * 3 + [(1, 0)]), axis=-1)))  # [b, g, j, c+1, c+1]
    states = jnp.einsum("bgjzc,bcgjpn->bzgjpn", decay_chunk, states)[:, :-1]

    # 4. each chunk's incoming state read out through C, decayed to each position
    state_decay = jnp.exp(da_cum).transpose(0, 3, 4, 1, 2)  # [b, c, q, g, j]
    y_off = jnp.einsum("bclgn,bcgjpn->bclgjp", cs, states) * state_decay[..., None]
    return (y_diag + y_off).reshape(b, seq, h, p).astype(x.dtype)


def get_flops():
    b, seq, h, p, g, n = SIZES["full"]
    q = CHUNK
    c = seq // q
    return (2 * b * seq * q * g * n      # C B^T within chunks
            + 2 * b * seq * q * h * p    # (C B^T * decay) X within chunks
            + 2 * b * seq * h * p * n    # chunk states
            + 2 * b * (c + 1) ** 2 * h * p * n  # chunk-to-chunk recurrence
            + 2 * b * seq * h * p * n)   # state read-out
