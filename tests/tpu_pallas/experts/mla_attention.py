"""DeepSeek-V3 MLA (3p) as the published Pallas MLA is built: the low-rank projections and RoPE stay in XLA, the
causal attention (head width 192 for q and k, 128 for v) runs in the flash kernel (flash_core.py). The task's
kernel_owns is the attention, so the projections are allowed outside the kernel."""
# @include flash_core.py

ROPE_THETA = 10000.0


def _rotate(x, cos, sin):
    even, odd = x[..., 0::2], x[..., 1::2]
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    return jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1).reshape(x.shape)


def computation(x, q_down, q_up, kv_down, k_up, v_up, o_proj):
    b, s, _ = x.shape
    kvl = k_up.shape[0]
    rope = kv_down.shape[1] - kvl
    h = (q_up.shape[1] - k_up.shape[1]) // rope
    nope, vd = k_up.shape[1] // h, v_up.shape[1] // h
    q = (x @ q_down @ q_up).reshape(b, s, h, nope + rope)
    latent = x @ kv_down
    k_nope = (latent[..., :kvl] @ k_up).reshape(b, s, h, nope)
    v = (latent[..., :kvl] @ v_up).reshape(b, s, h, vd)
    freqs = 1.0 / ROPE_THETA ** (jnp.arange(0, rope, 2, dtype=jnp.float32) / rope)
    angles = jnp.outer(jnp.arange(s, dtype=jnp.float32), freqs)
    cos, sin = jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype)
    q = jnp.concatenate([q[..., :nope], _rotate(q[..., nope:], cos, sin)], axis=-1)
    k_pe = _rotate(jnp.broadcast_to(latent[:, :, None, kvl:], (b, s, h, rope)), cos, sin)
    k = jnp.concatenate([k_nope, k_pe], axis=-1)
    q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))  # BSHD -> BHSD for the kernel
    out = flash_attention(q, k, v, scale=(nope + rope) ** -0.5)
    return out.transpose(0, 2, 1, 3).reshape(b, s, h * vd) @ o_proj
