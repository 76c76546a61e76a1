"""4p_Sparse_Attention: causal block-sparse GQA attention (local window + strided blocks), layout [B, S, H, D]."""
import math

import jax
import jax.numpy as jnp

# B, S, query heads, kv heads, D. Group size 8 at both sizes.
SIZES = {"full": (4, 4096, 64, 8, 128), "small": (1, 1024, 16, 2, 128)}
# Static block pattern: block size, local window in blocks (the diagonal block and the one before it),
# and the stride of the "global" key blocks every query block may also read (blocks 0, 4, 8, ...).
BLOCK, LOCAL_BLOCKS, STRIDE = 128, 2, 4
Q_CHUNK = 256  # query rows per step of the reference's lax.map


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, s, hq, hkv, d = SIZES[size]
    kq, kk, kv = jax.random.split(jax.random.key(seed), 3)
    q = jax.random.normal(kq, (b, s, hq, d), dtype)
    k = jax.random.normal(kk, (b, s, hkv, d), dtype)
    v = jax.random.normal(kv, (b, s, hkv, d), dtype)
    return (q, k, v), (BLOCK, LOCAL_BLOCKS, STRIDE)


def block_mask(n_blocks, local_blocks, stride):
    """[n_blocks, n_blocks] bool: may query block i read key block j."""
    i = jnp.arange(n_blocks)[:, None]
    j = jnp.arange(n_blocks)[None, :]
    return (j <= i) & ((i - j < local_blocks) | (j % stride == 0))


def computation(q, k, v, block, local_blocks, stride):
    b, s, hq, d = q.shape
    hkv = k.shape[2]
    g = hq // hkv
    scale = 1.0 / math.sqrt(d)
    # Token-level mask: the block pattern, and causal inside the diagonal block.
    allowed_blocks = jnp.repeat(jnp.repeat(block_mask(s // block, local_blocks, stride), block, 0), block, 1)
    pos = jnp.arange(s)
    mask = allowed_blocks & (pos[:, None] >= pos[None, :])  # [S, S]
    chunk = min(Q_CHUNK, s)
    n = s // chunk
    # Dense masked attention over query chunks (lax.map), so the scores fit in HBM at full size.
    q_chunks = jnp.moveaxis(q.reshape(b, n, chunk, hkv, g, d), 1, 0)  # [n, B, chunk, Hkv, G, D]
    mask_chunks = mask.reshape(n, chunk, s)

    def one_chunk(args):
        qc, mc = args
        scores = jnp.einsum("bqhgd,bkhd->bhgqk", qc, k, preferred_element_type=jnp.float32) * scale
        scores = jnp.where(mc, scores, -jnp.inf)
        probs = jax.nn.softmax(scores, axis=-1)
        out = jnp.einsum("bhgqk,bkhd->bqhgd", probs.astype(v.dtype), v, preferred_element_type=jnp.float32)
        return out.astype(q.dtype)

    out = jax.lax.map(one_chunk, (q_chunks, mask_chunks))  # [n, B, chunk, Hkv, G, D]
    return jnp.moveaxis(out, 0, 1).reshape(b, s, hq, d)


def get_flops():
    # Useful work: the two matmuls over the allowed (query block, key block) pairs only; the
    # diagonal blocks are counted in full (not halved for the causal triangle inside them).
    b, s, hq, hkv, d = SIZES["full"]
    nb = s // BLOCK
    pairs = sum(1 for i in range(nb) for j in range(i + 1) if i - j < LOCAL_BLOCKS or j % STRIDE == 0)
    return 2 * 2 * b * hq * pairs * BLOCK * BLOCK * d
