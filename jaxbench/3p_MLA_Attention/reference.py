"""3p_MLA_Attention: DeepSeek-V3 multi-head latent attention core (causal), from projected q and the kv latent."""
import math

import jax
import jax.numpy as jnp

# B, S, heads, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim
SIZES = {"full": (4, 2048, 128, 512, 128, 64, 128), "small": (1, 512, 16, 512, 128, 64, 128)}
Q_CHUNK = 256  # query rows per step of the reference's lax.map

# DeepSeek-V3 softmax scale: qk_head_dim^-0.5 times the YaRN mscale squared
# (rope_scaling factor 40, mscale_all_dim 1.0: mscale = 0.1 * ln(40) + 1).
_MSCALE = 0.1 * 1.0 * math.log(40.0) + 1.0
SOFTMAX_SCALE = (128 + 64) ** -0.5 * _MSCALE * _MSCALE


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, s, h, r, dn, dr, dv = SIZES[size]
    kq, kc, kr, ku, kv = jax.random.split(jax.random.key(seed), 5)
    q = jax.random.normal(kq, (b, s, h, dn + dr), dtype)  # [nope | rope], RoPE already applied
    kv_latent = jax.random.normal(kc, (b, s, r), dtype)  # c_kv after kv_a_layernorm
    k_rope = jax.random.normal(kr, (b, s, dr), dtype)  # shared by all heads, RoPE already applied
    w_uk = (jax.random.normal(ku, (r, h, dn), jnp.float32) / math.sqrt(r)).astype(dtype)
    w_uv = (jax.random.normal(kv, (r, h, dv), jnp.float32) / math.sqrt(r)).astype(dtype)
    return (q, kv_latent, k_rope, w_uk, w_uv), (SOFTMAX_SCALE,)


def computation(q, kv_latent, k_rope, w_uk, w_uv, softmax_scale):
    b, s, h, dq = q.shape
    dn = w_uk.shape[-1]
    # Expand the latent into per-head keys and values (the kv_b_proj of DeepSeek-V3).
    k_nope = jnp.einsum("bsr,rhd->bshd", kv_latent, w_uk, preferred_element_type=jnp.float32).astype(q.dtype)
    v = jnp.einsum("bsr,rhd->bshd", kv_latent, w_uv, preferred_element_type=jnp.float32).astype(q.dtype)
    chunk = min(Q_CHUNK, s)
    n = s // chunk
    # [B, H, S, S] f32 scores are 8 GiB at full size: walk over query chunks with lax.map.
    q_chunks = jnp.moveaxis(q.reshape(b, n, chunk, h, dq), 1, 0)  # [n, B, chunk, H, Dq]
    k_pos = jnp.arange(s)

    def one_chunk(args):
        i, qc = args
        # q.k = q_nope.k_nope + q_rope.k_rope (the rope key is the same for every head).
        scores = (jnp.einsum("bqhd,bkhd->bhqk", qc[..., :dn], k_nope, preferred_element_type=jnp.float32)
                  + jnp.einsum("bqhd,bkd->bhqk", qc[..., dn:], k_rope, preferred_element_type=jnp.float32))
        scores = scores * softmax_scale
        q_pos = i * chunk + jnp.arange(chunk)
        scores = jnp.where(q_pos[:, None] >= k_pos[None, :], scores, -jnp.inf)
        probs = jax.nn.softmax(scores, axis=-1)
        out = jnp.einsum("bhqk,bkhd->bqhd", probs.astype(v.dtype), v, preferred_element_type=jnp.float32)
        return out.astype(q.dtype)

    out = jax.lax.map(one_chunk, (jnp.arange(n), q_chunks))  # [n, B, chunk, H, Dv]
    return jnp.moveaxis(out, 0, 1).reshape(b, s, h, v.shape[-1])


def get_flops():
    # Up-projections of the latent to k_nope and v, plus causal attention counted as half of the
    # full q k^T (Dq = 192) and p v (Dv = 128) products.
    b, s, h, r, dn, dr, dv = SIZES["full"]
    up = 2 * b * s * r * h * (dn + dv)
    attn = (2 * b * h * s * s * (dn + dr) + 2 * b * h * s * s * dv) // 2
    return up + attn
