"""MLA (3p, kernel_owns: attention) with the roles swapped: the projections run in a real Pallas matmul kernel,
the attention the kernel must own runs in jnp. Its glue matmuls are the attention's (shapes the reference has
only inside its owned scope), so the room the projections' FLOPs would buy is not there: rejected."""
import jax
import jax.numpy as jnp

# @include honest_matmul.py as matmul


def _rotate(x, cos, sin):
    even, odd = x[..., 0::2], x[..., 1::2]
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    return jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1).reshape(x.shape)


def _project(x, w):  # through the Pallas kernel: [rows, K] @ [K, N]
    return matmul(x.reshape(-1, x.shape[-1]), w).reshape(*x.shape[:-1], w.shape[1])


def computation(x, q_down, q_up, kv_down, k_up, v_up, o_proj):
    b, s, _ = x.shape
    kvl = k_up.shape[0]
    rope = kv_down.shape[1] - kvl
    h = (q_up.shape[1] - k_up.shape[1]) // rope
    nope, vd = k_up.shape[1] // h, v_up.shape[1] // h
    q = _project(_project(x, q_down), q_up).reshape(b, s, h, nope + rope)
    latent = x @ kv_down
    k_nope = (latent[..., :kvl] @ k_up).reshape(b, s, h, nope)
    v = (latent[..., :kvl] @ v_up).reshape(b, s, h, vd)
    freqs = 1.0 / 10000.0 ** (jnp.arange(0, rope, 2, dtype=jnp.float32) / rope)
    angles = jnp.outer(jnp.arange(s, dtype=jnp.float32), freqs)
    cos, sin = jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype)
    q = jnp.concatenate([q[..., :nope], _rotate(q[..., nope:], cos, sin)], axis=-1)
    k = jnp.concatenate([k_nope, _rotate(jnp.broadcast_to(latent[:, :, None, kvl:], (b, s, h, rope)), cos, sin)], -1)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) * (nope + rope) ** -0.5  # the owned attention, in XLA
    probs = jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((s, s), bool)), scores, -1e9), axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, s, h * vd)
    return _project(out, o_proj)
