"""Attention inside a staged program as one flash kernel, copied verbatim into every staged candidate.

A program with projections around its attention (MLA's low-rank q and kv,
RoPE) is no case for the attention template, so the staged runtime used to run
q·kᵀ and p·v as two matmul kernels with the softmax between them in XLA: the
scores made an HBM round trip four times (3p: 4.3 GB of f32 scores, 27 ms of
glue against XLA's 20 ms in all). The attentions staged_attention_match.py
finds run here as one online-softmax kernel: grid (heads / hb, query blocks,
key blocks), keys innermost, hb heads a step, the running max and sum
lane-dense in VMEM. The scores' tail is bound on each tile as the reference
binds it; its positional operands (a causal mask) are computed on the tile
from its coordinates instead of read. Key blocks whose every score the tail
masks (a fill at or below ``MASK_FLOOR``, whatever the scores) are skipped and
their k and v not fetched, when every query row keeps a key; blocks where the
mask's predicate is the same throughout skip computing it.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from .attention_match import _producers
from .epilogue import _bind_elementwise, _is_literal
from .matmul import VMEM_LIMIT_BYTES, _free_dims, _grouped, _sublane_tile, _tile
from .paged import _paged_attention, _paged_sources, _per_item

# --- the staged runtime (pasted into candidates from here on) ---
#: A score the tail sets at or below this whatever the matmul gave is masked: exp(s - max) is 0 in f32 for any
#: row whose kept scores are above MASK_FLOOR + 104 (masks fill -1e9, which bf16 rounds to -9.998e8, -1e30,
#: finfo.min or -inf).
MASK_FLOOR = -1e6
#: Blocks are skipped only when the mask can be evaluated whole at trace time (this many scores at most).
MASK_EVAL_LIMIT = 1 << 24
#: Query rows and keys per step: a (1024, 512) f32 score tile is 2 MiB of VMEM, and the grid's steps are few
#: enough that their fixed cost stays under the exp's (2048 x 2048 tiles could not skip a causal half).
FLASH_BLOCK_Q, FLASH_BLOCK_K = 1024, 512
#: Heads per step: as many as keep a step's f32 scores within this (a grid step costs about 0.57 us on v6e, and
#: 3p's 512 heads x 8 blocks were 2.3 ms of it).
FLASH_SCORE_BYTES = 8 << 20


def _positions(jaxpr, plan, producer, tile, corner, scalars):
    """read(var) of the tail's positional values on a (rows, cols) tile whose corner is (row0, col0), each at
    its natural shape: (rows, 1) along the queries, (1, cols) along the keys, (1, 1) constant, so a causal
    mask costs one compare per score, not its whole expression. ``scalars``: the values of
    ``plan.scalars()`` and then of ``plan.batch_scalars()`` at the tile's batch item; ``producer``: {var: index
    of its equation}. Folded rows are (group, query) pairs: a row's query is its index modulo the queries."""
    eqns = jaxpr.eqns
    names = plan.scalars() + [v for v, _ in plan.batch_scalars()]
    env = dict(zip(names, (jnp.full((1, 1), x, jnp.int32) for x in scalars), strict=True))
    period = eqns[plan.scores].outvars[0].aval.shape[-2] if plan.fold else None

    def read(v):
        if _is_literal(v):
            return jnp.asarray(v.val, v.aval.dtype).reshape(1, 1)
        if v not in env:
            env[v] = _position_value(eqns[producer[v]], read, plan.positional[v], tile, corner, period)
        return env[v]

    return read


def _position_value(eqn, read, axes, tile, corner, period):
    """One positional equation on the tile: an iota counts the tile's rows or columns from its corner, a
    broadcast is its operand, anything else is bound on its operands brought to a common shape."""
    name = eqn.primitive.name
    if name == "iota":
        axis = axes[eqn.params["dimension"]]
        if axis is None:
            return jnp.zeros((1, 1), eqn.params["dtype"])
        dim = 0 if axis == "m" else 1
        at = lax.broadcasted_iota(jnp.int32, (tile[0], 1) if dim == 0 else (1, tile[1]), dim) + corner[dim]
        return (at % period if period and dim == 0 else at).astype(eqn.params["dtype"])
    if name == "broadcast_in_dim":
        return read(eqn.invars[0])
    ins = [read(u) for u in eqn.invars]
    shape = np.broadcast_shapes(*(x.shape for x in ins))
    return _bind_elementwise(eqn, [jnp.broadcast_to(x, shape) for x in ins])


def _score_function(jaxpr, plan, chosen=None):
    """fn(f32 scores tile, its first row, its first column) -> the tail's scores on the tile: the matmul's
    dtype first, then each tail equation bound as the reference binds it, positional operands computed from
    the tile's coordinates. ``chosen``: {tail select: the case it takes on every score of the tile} for tiles
    where its positional predicate is the same throughout (the mask is then not computed at all)."""
    eqns, chosen, producer = jaxpr.eqns, chosen or {}, _producers(jaxpr)
    start = eqns[plan.scores].outvars[0]

    def run(tile, row0, col0, scalars=()):
        env = {start: tile.astype(start.aval.dtype)}
        positions = _positions(jaxpr, plan, producer, tile.shape[-2:], (row0, col0), scalars)

        def read(v):
            return env[v] if not _is_literal(v) and v in env else jnp.broadcast_to(positions(v), tile.shape)

        for j in plan.tail:
            e = eqns[j]
            env[e.outvars[0]] = read(e.invars[1 + chosen[j]]) if j in chosen else \
                _bind_elementwise(e, [read(u) for u in e.invars])
        return env[eqns[plan.tail[-1]].outvars[0]] if plan.tail else env[start]

    return run


def _host(fn):
    """fn() evaluated now, on the host, as numpy (the program may be traced for a chip that is not here)."""
    with jax.ensure_compile_time_eval(), jax.default_device(jax.devices("cpu")[0]):
        return np.asarray(fn())


def _block_kinds(jaxpr, plan, m, n, bq, bk, mp, np_):
    """(kind of every (query block, key block), the tail each kind > 0 runs): kind 0 is skipped, every score
    of it masked; the others run ``_score_function(jaxpr, plan, chosen)`` with the selects whose positional
    predicate is the same over the block chosen. A score is masked when the tail gives the same value at or
    below MASK_FLOOR for scores 0 and 1. Nothing is skipped when a row keeps no key (its weights are uniform
    over every key) or the mask is too large to evaluate (one kind, the whole tail)."""
    ni, nj = mp // bq, np_ // bk
    if m * n > MASK_EVAL_LIMIT or plan.scalars() or plan.batch_scalars():  # not known before the program runs
        return np.ones(ni * nj, np.int32), [{}]
    full = _score_function(jaxpr, plan)
    low, high = (_host(lambda x=x: full(jnp.full((m, n), x, jnp.float32), 0, 0).astype(jnp.float32))
                 for x in (0.0, 1.0))
    masked = (low == high) & (low <= MASK_FLOOR)
    skips = masked.any() and not masked.all(axis=1).any()
    selects = [j for j in plan.tail if jaxpr.eqns[j].primitive.name == "select_n"
               and jaxpr.eqns[j].invars[0] in plan.positional]
    at = _positions(jaxpr, plan, _producers(jaxpr), (m, n), (0, 0), ())
    preds = {j: _host(lambda j=j: jnp.broadcast_to(at(jaxpr.eqns[j].invars[0]), (m, n))) for j in selects}
    kinds, variants = np.zeros((ni, nj), np.int32), []
    for i, j in np.ndindex(ni, nj):
        rows, cols = slice(i * bq, min((i + 1) * bq, m)), slice(j * bk, min((j + 1) * bk, n))
        if skips and masked[rows, cols].all():
            continue
        chosen = {t: int(p[rows, cols].flat[0]) for t, p in preds.items() if _uniform(p[rows, cols])}
        if chosen not in variants:
            variants.append(chosen)
        kinds[i, j] = variants.index(chosen) + 1
    return kinds.reshape(-1), variants


def _uniform(block):
    return bool((block == block.flat[0]).all())


def _key_blocks(visible, ni, nj):
    """The key block each step fetches: its own when visible, else the one already in VMEM (the last visible
    one of its row of blocks, or the first for the row's first steps), so a skipped step copies nothing."""
    table = visible.reshape(ni, nj)
    keys = np.zeros((ni, nj), np.int32)
    for i in range(ni):
        seen = np.flatnonzero(table[i])
        last = seen[0] if seen.size else 0
        for j in range(nj):
            last = j if table[i, j] else last
            keys[i, j] = last
    return keys.reshape(-1)


def _flash_kernel(kinds_ref, keys_ref, scalars_ref, batch_ref, q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *,
                  tails, n, n_scalars, n_batch):
    """One (query block, key block) step of the online softmax, running max and sum lane-dense (bq, 128): the
    step runs the tail of its block's kind (``_block_kinds``; kind 0 is skipped). With per-item scalars
    (``n_batch``) a step holds one batch item."""
    del keys_ref  # read by the index maps only
    g, i, j, nj = pl.program_id(0), pl.program_id(1), pl.program_id(2), pl.num_programs(2)
    bq, bk = q_ref.shape[1], k_ref.shape[1]
    scalars = [scalars_ref[t] for t in range(n_scalars)] + [batch_ref[g * n_batch + t] for t in range(n_batch)]

    @pl.when(j == 0)
    def _init():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    for kind, tail in enumerate(tails, start=1):
        pl.when(kinds_ref[i * nj + j] == kind)(functools.partial(
            _online_softmax_step, lambda: (q_ref[...], k_ref[...], v_ref[...]), m_ref, l_ref, acc_ref,
            row0=i * bq, col0=j * bk, tail=functools.partial(tail, scalars=scalars), n=n))

    @pl.when(j == nj - 1)
    def _store():
        o_ref[...] = (acc_ref[...] / l_ref[..., :1]).astype(o_ref.dtype)


def _online_softmax_step(load, m_ref, l_ref, acc_ref, *, row0, col0, tail, n):
    """hb heads' (bq, bk) scores at once, on the (hb, bq, d) q and (hb, bk, d) k and (hb, bk, e) v that
    ``load()`` reads, the tile's first row and column at (row0, col0): the tail, then the running max, sum and
    weighted v updated."""
    q, k, v = load()
    bk = k.shape[1]
    s = lax.dot_general(q, k, (((2,), (2,)), ((0,), (0,))), preferred_element_type=jnp.float32)
    s = tail(s, row0, col0).astype(jnp.float32)
    if n is not None:  # padded keys weigh nothing
        s = jnp.where(lax.broadcasted_iota(jnp.int32, (1, bk), 1) + col0 < n, s, -jnp.inf)
    m_prev = m_ref[...]
    m_new = jnp.maximum(m_prev, jnp.max(s, axis=2, keepdims=True))
    m_safe = jnp.where(m_new == -jnp.inf, 0.0, m_new)  # a row all -inf so far: no NaN from -inf - -inf
    p = jnp.exp(s - m_safe[..., :1])
    alpha = jnp.exp(m_prev - m_safe)
    l_ref[...] = alpha * l_ref[...] + jnp.sum(p, axis=2, keepdims=True)
    acc_ref[...] = alpha[..., :1] * acc_ref[...] + lax.dot_general(
        p.astype(v.dtype), v, (((2,), (1,)), ((0,), (0,))), preferred_element_type=jnp.float32)
    m_ref[...] = m_new


def _flash_attention(q, k, v, jaxpr, plan, scalars, per_item, out_dtype):
    """softmax(tail(q kᵀ)) v for (B, M, D) q, (B, N, D) k, (B, N, E) v: grid (B, M/bq, N/bk), keys innermost
    and "arbitrary"; fully masked key blocks skipped and not fetched, the mask computed only on blocks it
    cuts through (``_block_kinds``, ``_key_blocks``). ``per_item``: the tail's per-item scalars, flattened
    (item, scalar); with any, a step holds one item."""
    b, m, d = q.shape
    n, e = v.shape[1], v.shape[2]
    n_batch = len(plan.batch_scalars())
    bq, mp = _tile(m, FLASH_BLOCK_Q, _sublane_tile(q.dtype.itemsize))
    bk, np_ = _tile(n, FLASH_BLOCK_K, 128)
    ni, nj = mp // bq, np_ // bk
    hb = 1 if n_batch else max(h for h in range(1, b + 1) if b % h == 0 and h * bq * bk * 4 <= FLASH_SCORE_BYTES)
    kinds, variants = _block_kinds(jaxpr, plan, m, n, bq, bk, mp, np_)
    keys = _key_blocks(kinds != 0, ni, nj)
    q = jnp.pad(q, ((0, 0), (0, mp - m), (0, 0))) if mp != m else q
    if np_ != n:
        k, v = (jnp.pad(x, ((0, 0), (0, np_ - n), (0, 0))) for x in (k, v))
    out = pl.pallas_call(
        functools.partial(_flash_kernel, tails=[_score_function(jaxpr, plan, c) for c in variants],
                          n=n if np_ != n else None, n_scalars=len(scalars), n_batch=n_batch),
        out_shape=jax.ShapeDtypeStruct((b, mp, e), out_dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4, grid=(b // hb, ni, nj),
            in_specs=[pl.BlockSpec((hb, bq, d), lambda g, i, j, kinds, ks, *_: (g, i, 0)),
                      pl.BlockSpec((hb, bk, d), lambda g, i, j, kinds, ks, *_: (g, ks[i * nj + j], 0)),
                      pl.BlockSpec((hb, bk, e), lambda g, i, j, kinds, ks, *_: (g, ks[i * nj + j], 0))],
            out_specs=pl.BlockSpec((hb, bq, e), lambda g, i, j, kinds, ks, *_: (g, i, 0)),
            scratch_shapes=[pltpu.VMEM((hb, bq, 128), jnp.float32), pltpu.VMEM((hb, bq, 128), jnp.float32),
                            pltpu.VMEM((hb, bq, e), jnp.float32)]),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary"),
                                             vmem_limit_bytes=VMEM_LIMIT_BYTES),
    )(jnp.asarray(kinds), jnp.asarray(keys), jnp.stack([*scalars, jnp.int32(0)]).astype(jnp.int32),
      jnp.concatenate([per_item, jnp.zeros((1,), jnp.int32)]), q, k, v)
    return out[:, :m] if mp != m else out


def _attention_on_kernel(jaxpr, plan, read, repeats):
    """The output matmul's value of an attention (``_Attention``), computed by the flash kernel: q, k and v
    brought to (B, M, D), (B, N, D) and (B, N, E), the result back to the output matmul's layout. A fold
    reads k and v before their repeat and puts the group on q's rows (group-major). Keys and values that are
    pages of a cache (``_paged_sources``) are read by the paged kernel from the cache itself."""
    d1, d2 = jaxpr.eqns[plan.scores], jaxpr.eqns[plan.out]
    (lc, rc), (lb, rb) = d1.params["dimension_numbers"]
    vc, vb = (dims[1 - plan.p_side] for dims in d2.params["dimension_numbers"])
    k_var, v_var = d1.invars[1], d2.invars[1 - plan.p_side]
    k_src, v_src = (repeats[x][0] if plan.fold else x for x in (k_var, v_var))
    q, k_aval, v_aval = read(d1.invars[0]), k_src.aval, v_src.aval
    lf, rf, vf = _free_dims(q, lc, lb), _free_dims(k_aval, rc, rb), _free_dims(v_aval, vc, vb)
    batch, e_dims, g = [k_aval.shape[x] for x in rb], [v_aval.shape[x] for x in vf], plan.fold[1] if plan.fold else 1
    dtype = jnp.promote_types(q.dtype, k_aval.dtype)
    if plan.fold:  # q's head dim as (kv head, group), the group before the queries
        h = lb[plan.fold[0]]
        q = q.reshape(*q.shape[:h], q.shape[h] // g, g, *q.shape[h + 1:])
        lb, lf, lc = ([x + (x > h) for x in dims] for dims in (lb, lf, lc))
        lf = [h + 1, *lf]
    qc = _grouped(q, lb, lf, lc).astype(dtype)
    scalars = [read(x) for x in plan.scalars()]
    per_item = jnp.stack([_per_item(read(x), axes, batch) for x, axes in plan.batch_scalars()], axis=-1).reshape(-1) \
        if plan.batch_scalars() else jnp.zeros((0,), jnp.int32)
    paged = _paged_sources(jaxpr, k_src, v_src, (rb, rc, vb, vc), dtype, qc.shape[1])
    if paged is not None:
        out = _paged_attention(qc, paged, read, tail=_score_function(jaxpr, plan), step=_online_softmax_step,
                               scalars=scalars, batch_values=per_item, n_batch=len(plan.batch_scalars()),
                               out_dtype=d2.outvars[0].aval.dtype)
    else:
        kc, vcan = _grouped(read(k_src), rb, rf, rc).astype(dtype), _grouped(read(v_src), vb, vc, vf)
        out = _flash_attention(qc, kc, vcan, jaxpr, plan, scalars, per_item, d2.outvars[0].aval.dtype)
    nb, m = len(batch), qc.shape[1] // g
    out = out.reshape(*batch, g, m, *e_dims)
    if plan.fold:  # (.., kv head, .., group, queries, ..) -> (.., head, .., queries, ..)
        at = plan.fold[0]
        out = jnp.moveaxis(out, nb, at + 1)
        out = out.reshape(*batch[:at], batch[at] * g, *batch[at + 1:], m, *e_dims)
    else:
        out = out.reshape(*batch, m, *e_dims)
    if plan.p_side == 1:  # the weights were the right operand: (batch, v's free dims, queries)
        out = jnp.transpose(out, (*range(nb), *range(nb + 1, nb + 1 + len(e_dims)), nb))
    return out
