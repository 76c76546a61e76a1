"""3p_MLA_Attention: a DeepSeek-V3 multi-head latent attention layer (low-rank q and kv, decoupled RoPE), causal."""
import jax
import jax.numpy as jnp

# batch, seq, embed, heads, q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim
SIZES = {"full": (4, 2048, 7168, 128, 1536, 512, 128, 64, 128),
         "small": (1, 256, 512, 4, 256, 128, 128, 64, 128)}
ROPE_THETA = 10000.0
MASKED = -1e9


def get_inputs(dtype=jnp.bfloat16, size="full", seed=42):
    b, s, e, h, ql, kvl, nope, rope, vd = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 7)

    def weight(key, shape):
        return jax.random.normal(key, shape, dtype) * 0.02

    x = jax.random.normal(keys[0], (b, s, e), dtype)
    q_down, q_up = weight(keys[1], (e, ql)), weight(keys[2], (ql, h * (nope + rope)))
    kv_down = weight(keys[3], (e, kvl + rope))
    k_up, v_up = weight(keys[4], (kvl, h * nope)), weight(keys[5], (kvl, h * vd))
    o_proj = weight(keys[6], (h * vd, e))
    return (x, q_down, q_up, kv_down, k_up, v_up, o_proj), ()


def rotate(x, cos, sin):
    """RoPE on interleaved pairs (x[..., 0::2], x[..., 1::2]) of x [B, S, H, rope]."""
    even, odd = x[..., 0::2], x[..., 1::2]
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    return jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1).reshape(x.shape)


def computation(x, q_down, q_up, kv_down, k_up, v_up, o_proj):
    b, s, _ = x.shape
    kvl = k_up.shape[0]
    rope = kv_down.shape[1] - kvl
    h, vd = _heads(q_up, k_up, v_up, rope)
    nope = k_up.shape[1] // h
    q = (x @ q_down @ q_up).reshape(b, s, h, nope + rope)
    latent = x @ kv_down
    k_latent, k_pe = latent[..., :kvl], latent[..., kvl:]
    k_nope = (k_latent @ k_up).reshape(b, s, h, nope)
    v = (k_latent @ v_up).reshape(b, s, h, vd)

    freqs = 1.0 / ROPE_THETA ** (jnp.arange(0, rope, 2, dtype=jnp.float32) / rope)
    angles = jnp.outer(jnp.arange(s, dtype=jnp.float32), freqs)
    cos, sin = jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype)
    q_pe = rotate(q[..., nope:], cos, sin)
    k_pe = rotate(jnp.broadcast_to(k_pe[:, :, None, :], (b, s, h, rope)), cos, sin)

    q = jnp.concatenate([q[..., :nope], q_pe], axis=-1)
    k = jnp.concatenate([k_nope, k_pe], axis=-1)
    with jax.named_scope("attention"):  # what the kernel must own (kernel_owns in kernel_task.yaml)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) * (nope + rope) ** -0.5
        causal = jnp.tril(jnp.ones((s, s), dtype=bool))
        probs = jax.nn.softmax(jnp.where(causal, scores, MASKED), axis=-1)
        out = jnp.einsum("bhqk,bkhd->bqhd", probs, v)
    return out.reshape(b, s, h * vd) @ o_proj


def _heads(q_up, k_up, v_up, rope):
    """(heads, v_head_dim) from the weights' widths: q_up is H*(nope+rope) wide, k_up H*nope."""
    h = (q_up.shape[1] - k_up.shape[1]) // rope
    return h, v_up.shape[1] // h


def get_flops():
    b, s, e, h, ql, kvl, nope, rope, vd = SIZES["full"]
    projections = 2 * b * s * (e * ql + ql * h * (nope + rope) + e * (kvl + rope) + kvl * h * nope
                               + kvl * h * vd + h * vd * e)
    return projections + 4 * b * h * s * s * (nope + rope)  # JAXBench counts p v at the q/k head width too
