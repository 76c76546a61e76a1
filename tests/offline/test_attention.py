"""The offline synthesizer's attention template: flash kernels that pass the cascade, declines, VMEM repair."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from maxkernel_core import EvalStatus, Plan

from maxkernel_synthesis.analysis import Analysis
from maxkernel_synthesis.ir import Declined, trace_reference
from maxkernel_synthesis.attention import AttentionSpec, Clause, Operand, analyse_attention
from maxkernel_tpu_offline.flash import K_ALIGN, blocks, q_align
from maxkernel_synthesis.task import OfflineDeclined
from maxkernel_tpu_offline.space import neighbours, space

from .test_synthesizer import offline_session

TASKS = Path(__file__).parent / "tasks"

# A reference in the style of the JaxBench attention tasks: layout [B, S, H, D], grouped-query heads,
# causal, written as a lax.map over query chunks with the kv heads reached by a reshape of q's heads.
CHUNKED_GQA = '''
import math

import jax
import jax.numpy as jnp

SIZES = {"full": (2, 2048, 32, 4, 128), "small": (1, 512, 8, 2, 128)}


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, s, hq, hkv, d = SIZES[size]
    kq, kk, kv = jax.random.split(jax.random.key(seed), 3)
    return (jax.random.normal(kq, (b, s, hq, d), dtype), jax.random.normal(kk, (b, s, hkv, d), dtype),
            jax.random.normal(kv, (b, s, hkv, d), dtype)), ()


def computation(q, k, v):
    b, s, hq, d = q.shape
    hkv = k.shape[2]
    chunk = 256
    n = s // chunk
    q_chunks = jnp.moveaxis(q.reshape(b, n, chunk, hkv, hq // hkv, d), 1, 0)

    def one_chunk(args):
        i, qc = args
        scores = jnp.einsum("bqhgd,bkhd->bhgqk", qc, k, preferred_element_type=jnp.float32) / math.sqrt(d)
        q_pos = i * chunk + jnp.arange(chunk)
        scores = jnp.where(q_pos[:, None] >= jnp.arange(s)[None, :], scores, -jnp.inf)
        probs = jax.nn.softmax(scores, axis=-1)
        out = jnp.einsum("bhgqk,bkhd->bqhgd", probs.astype(v.dtype), v, preferred_element_type=jnp.float32)
        return out.astype(q.dtype)

    out = jax.lax.map(one_chunk, (jnp.arange(n), q_chunks))
    return jnp.moveaxis(out, 0, 1).reshape(b, s, hq, d)
'''


def _write_task(tmp_path, name: str, source: str, atol: float = 0.02) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "kernel_task.yaml").write_text(f"task_id: {name}\natol: {atol}\nrtol: {atol}\n")
    (folder / "reference.py").write_text(source)
    return folder


def _attention_task(tmp_path, body: str, extra_inputs: str = "") -> Path:
    """[B, H, S, D] q, k, v (and whatever ``extra_inputs`` adds) with ``body`` as the computation."""
    return _write_task(tmp_path, "declined", (
        "import jax\nimport jax.numpy as jnp\n\n"
        "def get_inputs(dtype=jnp.float32):\n"
        "    k = jax.random.key(0)\n"
        "    q = jax.random.normal(k, (2, 4, 256, 128), dtype)\n"
        f"    return (q, q, q{extra_inputs}), ()\n\n"
        f"def computation(q, k, v{', idx' if extra_inputs else ''}):\n    {body}\n"))


@pytest.mark.slow
@pytest.mark.parametrize("task_name", ["attention_causal", "attention_gqa_bias"])
@pytest.mark.parametrize("target", ["v5e", pytest.param("v6e", marks=pytest.mark.second_chip)])
def test_attention_template_passes_the_cascade(tmp_path, task_name, target):
    session, backend = offline_session(tmp_path, TASKS / task_name, target)
    try:
        plan = session.plan()
        assert plan.decisions["template"] == "attention" and "estimate" in plan.summary
        candidate = session.implement(plan)
        code = candidate.code
        assert "template: attention" in code and "def _flash_attention_kernel(" in code
        assert f"BLOCK_Q = {plan.parameters['BLOCK_Q']}" in code and f"BLOCK_K = {plan.parameters['BLOCK_K']}" in code
        assert '"arbitrary")' in code and "pltpu.VMEM((bq, ev), jnp.float32)" in code
        if task_name == "attention_causal":  # causal: masked blocks skipped, their key blocks not fetched
            assert "pl.when(full)" in code and "_key_block(i, j)" in code
        else:  # GQA: the kv head comes from the index map, nothing is repeated
            assert "jax.lax.div(g1, n1 // a1.shape[1])" in code and "jnp.repeat" not in code
        verdict = session.evaluate(candidate)
        assert verdict.status is EvalStatus.OK, verdict.reason
        assert verdict.details["compile"]["device_kind"].startswith(f"TPU v{target[1]}")
    finally:
        backend.close()


@pytest.mark.slow
@pytest.mark.parametrize("task", ["attention_causal", "attention_gqa_bias", "chunked_gqa"])
def test_small_blocks_exercise_skipping_clamping_and_head_mapping(tmp_path, task):
    """At the small size the default blocks cover the whole sequence; 128 x 128 blocks make the interpret-mode
    check walk several query and key blocks: skipped, clamped, partially and fully visible ones."""
    path = _write_task(tmp_path, task, CHUNKED_GQA) if task == "chunked_gqa" else TASKS / task
    session, backend = offline_session(tmp_path, path)
    try:
        session.plan()
        candidate = session.implement(Plan(session.task.id, "small blocks", {"template": "attention"},
                                           {"BLOCK_Q": 128, "BLOCK_K": 128, "VMEM_LIMIT_BYTES": 32 << 20}))
        verdict = session.evaluate(candidate)
        assert verdict.status is EvalStatus.OK, verdict.reason
    finally:
        backend.close()


def test_analysis_reads_a_chunked_grouped_query_reference(tmp_path):
    """lax.map over query chunks, [B, S, H, D], kv heads by reshape: one query axis, heads on the grid, the kv
    head a major part of the q head axis, the causal mask as the clause q - k >= 0 on whole positions."""
    import importlib.util

    import jax

    path = _write_task(tmp_path, "chunked", CHUNKED_GQA) / "reference.py"
    spec_ = importlib.util.spec_from_file_location("chunked_ref", path)
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    shapes = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in jax.eval_shape(lambda: module.get_inputs()[0])]
    spec = analyse_attention(trace_reference(module.computation, shapes, ()))
    roles = {o.role: o.roles for o in spec.operands}
    assert roles["q"] == [("grid", 0, "full"), ("q",), ("grid", 1, "full"), ("d",)]
    assert roles["k"] == [("grid", 0, "full"), ("k",), ("grid", 1, "major"), ("d",)]
    assert roles["out"] == [("grid", 0, "full"), ("q",), ("grid", 1, "full"), ("e",)]
    assert spec.clauses == [Clause(1, -1, 0)] and spec.skip and (spec.sq, spec.sk, spec.d) == (2048, 2048, 128)
    assert spec.p_dtype == "bfloat16" and spec.out_dtype == "bfloat16"


@pytest.mark.parametrize("body, extra, reason", [
    # softmax over the queries: attention-shaped, but the flash template cannot stream it
    ("return jnp.einsum('bhqk,bhkd->bhqd', jax.nn.softmax(jnp.einsum('bhqd,bhkd->bhqk', q, k), axis=-2), v)", "",
     "softmax over an axis that is not the key axis"),
    # paged attention: keys read through a page table
    ("kk = k[:, :, idx]\n    return jnp.einsum('bhqk,bhkd->bhqd', "
     "jax.nn.softmax(jnp.einsum('bhqd,bhkd->bhqk', q, kk), axis=-1), v)",
     ", jnp.arange(256)[::-1]", "reads through an index array"),
])
def test_attention_declines_with_the_reason(tmp_path, body, extra, reason):
    session, backend = offline_session(tmp_path, _attention_task(tmp_path, body, extra))
    try:
        plan = session.plan()
        if "index array" in reason:  # no batch fallback either: only the matmuls go on kernels
            assert plan.decisions["template"] == "staged" and reason in plan.decisions["why"]
        else:  # the batch fallback still computes it, and says why attention did not apply
            assert plan.decisions["template"] == "batch" and reason in plan.decisions["why"]
    finally:
        backend.close()


@pytest.mark.slow
def test_debugger_repairs_an_attention_vmem_overflow(tmp_path):
    session, backend = offline_session(tmp_path, TASKS / "attention_gqa_bias")
    try:
        session.plan()
        oversized = Plan(session.task.id, "too big on purpose", {"template": "attention"},
                         {"BLOCK_Q": 1024, "BLOCK_K": 1024, "VMEM_LIMIT_BYTES": 16 << 20})  # libtpu: overflows; one halving fits
        candidate = session.implement(oversized)
        verdict = session.evaluate(candidate)
        assert verdict.status is EvalStatus.COMPILE_ERROR and "vmem" in verdict.reason.lower()
        fixed = session.repair(candidate, verdict, max_attempts=6)
        assert fixed.evaluation.ok, fixed.evaluation.reason
        params = fixed.candidate.parameters
        assert params["BLOCK_Q"] * params["BLOCK_K"] < 1024 * 1024 and fixed.candidate.provenance.role == "debug"
        assert "halve the largest block" in fixed.candidate.provenance.transformation
    finally:
        backend.close()


def _spec(sq: int, sk: int, q_dtype: str, bias_dtype: str | None) -> AttentionSpec:
    ops = [Operand("q", 0, [("q",), ("d",)], q_dtype, (sq, 128)), Operand("k", 1, [("k",), ("d",)], q_dtype, (sk, 128)),
           Operand("v", 2, [("k",), ("e",)], q_dtype, (sk, 128)), Operand("out", -1, [("q",), ("e",)], q_dtype, (sq, 128))]
    if bias_dtype:
        ops.append(Operand("bias", 3, [("q",), ("k",)], bias_dtype, (sq, sk)))
    return AttentionSpec(ops, [], sq, sk, 128, 128, [], [], [], [], [], "float32", q_dtype, "float32", q_dtype,
                         [], False, [])


@settings(max_examples=60, deadline=None)
@given(sq=st.integers(1, 1 << 14), sk=st.integers(1, 1 << 14), small=st.integers(1, 1 << 12),
       q_dtype=st.sampled_from(["float32", "bfloat16", "int8"]),
       bias_dtype=st.sampled_from([None, "float32", "bfloat16", "bool"]))
def test_attention_space_never_proposes_an_illegal_block(sq, sk, small, q_dtype, bias_dtype):
    """Every point of the attention space and every neighbour gives, at the full size and at another size,
    blocks that divide the sequence and follow the (8, 128) rule for every array blocked by them."""
    spec = _spec(sq, sk, q_dtype, bias_dtype)
    a = Analysis("attention", None, sq, 128, {}, attention=spec)
    values = space(a, q_dtype)
    align = q_align(spec)
    assert align % 8 == 0 and all(v % align == 0 for v in values["BLOCK_Q"])
    points = [{"BLOCK_Q": bq, "BLOCK_K": bk} for bq in values["BLOCK_Q"] for bk in values["BLOCK_K"]]
    for point in points[:: max(1, len(points) // 12)]:
        for _, moved in [("", point), *neighbours(a, point, q_dtype)]:
            for n_q, n_k in ((sq, sk), (small, small)):
                bq, bk = blocks(spec, moved, n_q, n_k)
                assert n_q % bq == 0 and (bq == n_q or bq % align == 0)
                assert n_k % bk == 0 and (bk == n_k or bk % K_ALIGN == 0)


def test_attention_declines_a_positional_prologue(tmp_path):
    """q scaled by a function of the head-dim position (as RoPE is) is a prologue the template does not fuse."""
    body = ("d = jnp.arange(128)\n    s = jnp.einsum('bhqd,bhkd->bhqk', q * (d % 2), k)\n"
            "    return jnp.einsum('bhqk,bhkd->bhqd', jax.nn.softmax(s, axis=-1), v)")
    path = _attention_task(tmp_path, body) / "reference.py"
    import importlib.util

    import jax

    spec_ = importlib.util.spec_from_file_location("headdim_ref", path)
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    shapes = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in jax.eval_shape(lambda: module.get_inputs()[0])]
    with pytest.raises(Declined, match="the q operand depends on positions"):
        analyse_attention(trace_reference(module.computation, shapes, ()))


@pytest.mark.parametrize("body, clauses, skip, biases", [
    # jax.nn.dot_product_attention, layout [B, S, H, D], causal (its fill is a finite large negative)
    ("return jax.nn.dot_product_attention(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3), "
     "v.transpose(0, 2, 1, 3), is_causal=True)", [Clause(1, -1, 0)], True, 0),
    # a sliding window as an additive mask, q pre-scaled
    ("q = q * 0.1\n    i, j = jnp.arange(256)[:, None], jnp.arange(256)[None, :]\n"
     "    s = jnp.einsum('bhqd,bhkd->bhqk', q, k) + jnp.where((i >= j) & (i - j < 64), 0.0, -jnp.inf)\n"
     "    return jnp.einsum('bhqk,bhkd->bhqd', jax.nn.softmax(s, axis=-1), v)",
     [Clause(1, -1, 0), Clause(-1, 1, 63)], True, 0),
    # 2p's form: bf16 scores, jnp.tril's mask with a -1e9 fill, which bf16 rounds to -9.98e8 (still a mask)
    ("q, k, v = (x.astype(jnp.bfloat16) for x in (q, k, v))\n"
     "    s = jnp.einsum('bhqd,bhkd->bhqk', q, k) * 128 ** -0.5\n"
     "    s = jnp.where(jnp.tril(jnp.ones((256, 256), dtype=bool)), s, -1e9)\n"
     "    return jnp.einsum('bhqk,bhkd->bhqd', jax.nn.softmax(s, axis=-1), v)", [Clause(1, -1, 0)], True, 0),
    # a key-padding mask read from an input: a bias operand, no block skipping, normalised after the matmul
    ("s = jnp.where(idx[:, None, None, :] > 0, jnp.einsum('bhqd,bhkd->bhqk', q, k), -1e30)\n"
     "    e = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))\n"
     "    return jnp.einsum('bhqk,bhkd->bhqd', e, v) / jnp.sum(e, axis=-1, keepdims=True)", [], False, 1),
])
def test_analysis_reads_attention_variants(tmp_path, body, clauses, skip, biases):
    import importlib.util

    import jax

    extra = ", jnp.ones((2, 256), jnp.int32)" if "idx" in body else ""
    path = _attention_task(tmp_path, body, extra) / "reference.py"
    spec_ = importlib.util.spec_from_file_location(f"variant_{len(body)}", path)
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    box = {}

    def make():
        box["static"] = module.get_inputs()[1]
        return module.get_inputs()[0]

    shapes = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in jax.eval_shape(make)]
    spec = analyse_attention(trace_reference(module.computation, shapes, tuple(box["static"])))
    assert spec.clauses == clauses and spec.skip == skip and len(spec.biases) == biases
    assert (spec.sq, spec.sk, spec.d) == (256, 256, 128)
