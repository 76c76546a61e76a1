"""Flash attention on the GPU, from the attention the offline analysis recognised (``AttentionSpec``).

One program per (grid axes..., query block), the structure of jax's
``pallas/ops/gpu/attention.py``, written here from the spec: q's block stays
loaded; the key loop (``lax.fori_loop``) slices BLOCK_K keys and values from
the whole key axis, computes the reference's own score pipeline on the tile
(its mask and scale, ``_scores``, the chip-neutral ``scores_source``), and updates an
online softmax with an f32 running max, sum and accumulator; the output is
normalised once and stored once. Where the mask hides whole key blocks (the
spec's visible range), the loop starts and stops at the visible ones.
"""

from __future__ import annotations

from maxkernel_synthesis.attention.source import jnp_name, kernel_view, module_parts, scores_source

from .templates import HEADER

#: q, k and v must be plain loads and no bias: what the GPU template takes today (the TPU's takes more).
PLAIN_LOADS = (["q = q_ref[...]"], ["k = k_ref[...]"], ["v = v_ref[...]"])


def unsupported(spec) -> str | None:
    """Why the GPU template cannot write this attention, or None."""
    if spec.biases:
        return "it has a bias or mask operand (the GPU attention template takes q, k and v only)"
    if (spec.q_lines, spec.k_lines, spec.v_lines) != PLAIN_LOADS:
        return "q, k or v is transformed before the scores (the GPU attention template loads them as they are)"
    return None


def _spec(op, gnames: list[str], whole_keys: bool) -> str:
    """A BlockSpec over the kernel view: grid axes squeezed, q blocked by bq, the key axis whole."""
    perm, roles, _ = kernel_view(op)
    block, index = [], []
    for src, role in zip(perm + [None] * (len(roles) - len(perm)), roles, strict=False):
        if role[0] == "grid":
            g, part = role[1], role[2]
            block.append("None")
            index.append(f"g{g}" if part == "full" else f"jax.lax.div(g{g}, {gnames[g]} // x.shape[{src}])"
                         if part == "major" else f"jax.lax.rem(g{g}, x.shape[{src}])")
        elif role[0] == "one":
            block.append("None")
            index.append("0")
        else:
            block.append({"q": "bq", "k": "sk" if whole_keys else "bk", "d": "hd", "e": "ev", "unit": "1"}[role[0]])
            index.append("i" if role[0] == "q" else "0")
    args = ", ".join([f"g{g}" for g in range(len(gnames))] + ["i"])
    return f"pl.BlockSpec(({', '.join(block)},), lambda {args}: ({', '.join(index)},))"


def _kernel(m) -> list[str]:
    spec, ng = m.spec, m.ng
    first = f"jnp.maximum({m.fill(spec.k_first)}, 0) // bk" if spec.skip and spec.k_first else "0"
    last = (f"jnp.minimum(jnp.maximum({m.fill(spec.k_last)}, 0) // bk + 1, sk // bk)" if spec.skip and spec.k_last
            else "sk // bk")
    return [
        "def _flash_attention_kernel(q_ref, k_ref, v_ref, o_ref, *, bq, bk, sq, sk, hd, ev):",
        "    \"\"\"One query block of one (batch, head): the key loop with an online softmax, one store.\"\"\"",
        *[f"    g{g} = pl.program_id({g})" for g in range(ng)],
        f"    q_lo = pl.program_id({ng}) * bq",
        "    q_hi = q_lo + bq - 1",
        "    q = q_ref[...]",
        "",
        "    def step(j, carry):",
        "        m_prev, l_prev, acc = carry",
        "        k_lo = j * bk",
        "        k = k_ref[pl.ds(k_lo, bk), :]",
        "        v = v_ref[pl.ds(k_lo, bk), :]",
        "        s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)",
        *([f"        s = s.astype({jnp_name(spec.dot1_dtype)})"] if spec.dot1_dtype != "float32" else []),
        "        qpos = q_lo + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)",
        "        kpos = k_lo + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)",
        f"        s = _scores(s, qpos, kpos, {''.join(f'g{g}, ' for g in range(ng))}masked=True, sq=sq, sk=sk, "
        "hd=hd, ev=ev).astype(jnp.float32)",
        "        m_next = jnp.maximum(m_prev, jnp.max(s, axis=1))",
        "        m_safe = jnp.where(m_next == -jnp.inf, 0.0, m_next)  # rows whose keys so far are all masked",
        "        alpha = jnp.exp(m_prev - m_safe)",
        "        p = jnp.exp(s - m_safe[:, None])",
        "        l_next = alpha * l_prev + jnp.sum(p, axis=1)",
        f"        pv = jnp.dot(p.astype({jnp_name(spec.p_dtype)}), v, preferred_element_type=jnp.float32)",
        "        return m_next, l_next, alpha[:, None] * acc + pv",
        "",
        "    start = (jnp.full((bq,), -jnp.inf, jnp.float32), jnp.zeros((bq,), jnp.float32),",
        "             jnp.zeros((bq, ev), jnp.float32))",
        f"    _, l, acc = lax.fori_loop({first}, {last}, step, start)",
        f"    o = (acc / l[:, None]).astype({jnp_name(spec.dot2_dtype)})",
        *[f"    {m.fill(line)}" for line in spec.out_lines],
        "    o_ref[...] = o.astype(o_ref.dtype)", "", ""]


def _computation(m) -> list[str]:
    spec = m.spec
    q, out = spec.operand("q"), spec.operand("out")
    # a grouped head axis is split by the extent of the argument's own axis (the array as passed in)
    specs = [_spec(op, m.gnames, op.role != "q").replace("x.shape", f"{m.args[op.input]}.shape")
             for op in (q, spec.operand("k"), spec.operand("v"))]
    return [
        f"def computation({', '.join(m.args)}, *static):",
        *m.views,
        *[f"    n{g} = {m.args[q.input]}.shape[{axis}]" for g, (axis, _) in enumerate(spec.grid)],
        "    sq, hd = q.shape[-2], q.shape[-1]",
        "    sk, ev = k.shape[-2], v.shape[-1]",
        "    bq, bk = math.gcd(sq, BLOCK_Q), math.gcd(sk, BLOCK_K)",
        "    out = pl.pallas_call(",
        "        functools.partial(_flash_attention_kernel, bq=bq, bk=bk, sq=sq, sk=sk, hd=hd, ev=ev),",
        f"        out_shape=jax.ShapeDtypeStruct(({', '.join(m.out_dims)},), {jnp_name(out.dtype)}),",
        f"        grid=({''.join(n + ', ' for n in m.gnames)}sq // bq),",
        f"        in_specs=[{', '.join(specs)}],",
        f"        out_specs={_spec(out, m.gnames, False).replace('x.shape', 'q.shape')},",
        "        compiler_params=plgpu.CompilerParams(num_warps=NUM_WARPS, num_stages=NUM_STAGES),",
        "    )(q, k, v)",
        f"    return jnp.transpose(out, {tuple(sorted(range(len(m.out_perm)), key=m.out_perm.__getitem__))})"
        if m.out_moved else "    return out", ""]


def attention_module(spec, task_id: str, params: dict[str, int], why: str, n_dynamic: int, numbers) -> str:
    m = module_parts(spec, n_dynamic, numbers)
    header = HEADER.format(title=f"Flash attention (Pallas GPU) for {task_id}.", template="attention",
                           task_id=task_id, constants="\n".join(f"{k} = {v}" for k, v in params.items()),
                           why=f"Why: {why}. One program per query block; the key loop runs inside it with an online "
                           "softmax (f32 running max, sum and accumulator), the reference's score pipeline on each "
                           "tile, one normalisation and one store.")
    return "\n".join([header, "", *scores_source(m), *_kernel(m), *_computation(m)])
