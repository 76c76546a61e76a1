"""The causal flash-attention kernel the attention experts share (pasted into each by ``# @include``).

q blocks against k/v blocks with an online softmax, float32 statistics kept lane-dense in VMEM scratch, the
softmax scale folded into q, and the key blocks above the diagonal neither computed (``pl.when``) nor fetched
(their block index is clamped to the last needed block, so Pallas skips the copy). Layout [B, H, S, D]; grid
(B, H, S / BLOCK_Q, S / BLOCK_K), the key axis innermost; query head h reads kv head h // group.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK_Q, BLOCK_K = 512, 512
LANES = 128


def _kernel(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, block_q, block_k, scale):
    qi, ki = pl.program_id(2), pl.program_id(3)

    @pl.when(ki == 0)
    def _init():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(ki * block_k <= qi * block_q + block_q - 1)  # the block holds a key at or before some query
    def _block():
        q = (q_ref[...].astype(jnp.float32) * scale).astype(q_ref.dtype)
        s = jax.lax.dot_general(q, k_ref[...], (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
        q_pos = qi * block_q + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
        k_pos = ki * block_k + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
        s = jnp.where(q_pos >= k_pos, s, -jnp.inf)
        m_prev = m_ref[...][:, :1]
        m_new = jnp.maximum(m_prev, s.max(axis=-1, keepdims=True))
        p = jnp.exp(s - m_new)
        alpha = jnp.exp(m_prev - m_new)
        l_ref[...] = jnp.broadcast_to(alpha * l_ref[...][:, :1] + p.sum(axis=-1, keepdims=True), l_ref.shape)
        m_ref[...] = jnp.broadcast_to(m_new, m_ref.shape)
        pv = jnp.dot(p.astype(v_ref.dtype), v_ref[...], preferred_element_type=jnp.float32)
        acc_ref[...] = alpha * acc_ref[...] + pv

    @pl.when(ki == pl.num_programs(3) - 1)
    def _store():
        o_ref[...] = (acc_ref[...] / l_ref[...][:, :1]).astype(o_ref.dtype)


def flash_attention(q, k, v, *, scale, group=1):
    """Causal attention of q [B, H, S, Dqk] against k [B, H / group, S, Dqk] and v [B, H / group, S, Dv]:
    query head h reads kv head h // group (grouped-query attention when group > 1)."""
    b, h, s, dqk = q.shape
    dv = v.shape[-1]
    bq, bk = min(BLOCK_Q, s), min(BLOCK_K, s)

    def kv_block(bi, hi, qi, ki):  # past the diagonal, stay on the last block needed: no new copy
        return bi, hi // group, jnp.minimum(ki, (qi * bq + bq - 1) // bk), 0

    kernel = functools.partial(_kernel, block_q=bq, block_k=bk, scale=scale)
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((b, h, s, dv), q.dtype),
        grid=(b, h, s // bq, s // bk),
        in_specs=[
            pl.BlockSpec((None, None, bq, dqk), lambda bi, hi, qi, ki: (bi, hi, qi, 0)),
            pl.BlockSpec((None, None, bk, dqk), kv_block),
            pl.BlockSpec((None, None, bk, dv), kv_block),
        ],
        out_specs=pl.BlockSpec((None, None, bq, dv), lambda bi, hi, qi, ki: (bi, hi, qi, 0)),
        scratch_shapes=[pltpu.VMEM((bq, LANES), jnp.float32), pltpu.VMEM((bq, LANES), jnp.float32),
                        pltpu.VMEM((bq, dv), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")),
    )(q, k, v)

