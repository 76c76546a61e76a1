"""The held-out validation set: JAXBench's published v6e timings, never fitted on.

Two kinds of points. The 50 **references** are our jaxbench/ tasks (the same
programs JAXBench's baselines run), compiled for v6e and described by the XLA
model. The **expert kernels** are JAXBench's optimized variants: jax's own
Pallas library kernels (``jax.experimental.pallas.ops.tpu``) with the tuned
parameters its ``optimized.py`` files set, inside the same surrounding code,
described by the kernel model plus the XLA model of that code. Inputs that are
data at run time (page tables, lengths, group sizes) stay run-time inputs, as
the judge sees them.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import math
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from .fitset import describe, load_data

#: The operator class of each JAXBench task, for per-class error figures.
CLASSES = {"attention": ("1p", "2p", "3p", "4p", "5p", "6p", "7p"), "grouped matmul / MoE": ("10p", "11p", "14p"),
           "norm / loss": ("12p", "13p"), "sequence mixing": ("15p", "16p", "17p"),
           "convolution": ("18k", "22k", "25k", "28k", "33k", "34k", "39k", "46k")}


def operator_class(task_id: str) -> str:
    prefix = task_id.split("_")[0]
    for name, members in CLASSES.items():
        if prefix in members:
            return name
    return "gemm + epilogue"


def _module(folder: Path):
    spec = importlib.util.spec_from_file_location(f"jaxbench_{folder.name}", folder / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reference_program(folder: Path):
    """(fn, full-size input shapes) of a task's reference, its static arguments bound."""
    module = _module(folder)
    _, static = module.get_inputs(size="small")
    shapes = list(jax.eval_shape(lambda: module.get_inputs(size="full")[0]))
    return functools.partial(lambda s, *a: module.computation(*a, *s), static), shapes


def reference_points(suite: Path, log=print) -> list[dict[str, Any]]:
    """Each JAXBench task's reference, compiled for v6e, against its published baseline time."""
    measured = {p["workload"]: p["seconds"] for p in load_data("jaxbench_v6e")["points"] if p["variant"] == "baseline"}
    points = []
    for folder in sorted(suite.glob("[0-9]*_*"), key=lambda f: int(f.name.split("_")[0][:-1])):
        if folder.name not in measured:
            continue
        log(f"  {folder.name}")
        fn, shapes = _reference_program(folder)
        points.append({"source": "jaxbench_v6e", "id": folder.name, "target": "v6e", "measured_s": measured[folder.name],
                       "cls": operator_class(folder.name), "dispatch": False, "scheduler": False,
                       **describe(fn, shapes, "v6e", kernels=False)})
    return points


def _lib(name: str):
    return importlib.import_module(f"jax.experimental.pallas.ops.tpu.{name}")


def _flash(causal_blocks: tuple[int, int, int]):
    flash = _lib("flash_attention")
    bq, bkm, bk = causal_blocks
    return flash, flash.BlockSizes(block_q=bq, block_k_major=bkm, block_k=bk, block_b=1, block_q_major_dkv=128,
                                   block_k_major_dkv=128, block_k_dkv=128, block_q_dkv=128, block_k_major_dq=128,
                                   block_k_dq=128, block_q_dq=128)


def expert_1p():
    flash, sizes = _flash((2048, 2048, 1024))
    return (lambda q, k, v: flash.flash_attention(q, k, v, causal=True, sm_scale=128 ** -0.5, block_sizes=sizes),
            [jax.ShapeDtypeStruct((4, 64, 4096, 128), jnp.bfloat16)] * 3)


def _splash_gqa(batch: int, q_heads: int, kv_heads: int, bshd: bool):
    splash = _lib("splash_attention.splash_attention_kernel")
    masks = _lib("splash_attention.splash_attention_mask")
    s = 4096
    sizes = splash.BlockSizes(block_q=2048, block_kv=2048, block_kv_compute=1024,
                              q_layout=splash.QKVLayout(1), k_layout=splash.QKVLayout(1), v_layout=splash.QKVLayout(1))
    kernel = splash.make_splash_mha(masks.MultiHeadMask([masks.CausalMask((s, s))] * q_heads), block_sizes=sizes,
                                    head_shards=1, q_seq_shards=1)
    group = q_heads // kv_heads

    def attend(q, k, v):
        if bshd:
            q, k, v = (x.transpose(0, 2, 1, 3) for x in (q, k, v))
        out = jax.vmap(lambda qb, kb, vb: kernel(qb, jnp.repeat(kb, group, axis=0), jnp.repeat(vb, group, axis=0)))(
            q, k, v)
        return out.transpose(0, 2, 1, 3) if bshd else out

    layout = (lambda h: (batch, s, h, 128)) if bshd else (lambda h: (batch, h, s, 128))
    return attend, [jax.ShapeDtypeStruct(layout(h), jnp.bfloat16) for h in (q_heads, kv_heads, kv_heads)]


def expert_3p(suite: Path):
    """MLA as JAXBench's optimized 3p runs it: the projections and RoPE in XLA, attention in jax's flash kernel
    with the 192-wide q/k heads (and the 128-wide v) padded to 256."""
    flash, sizes = _flash((2048, 2048, 1024))
    ref = _module(suite / "3p_MLA_Attention")

    def mla(x, q_down, q_up, kv_down, k_up, v_up, o_proj):
        b, s, _ = x.shape
        kvl, rope = k_up.shape[0], kv_down.shape[1] - k_up.shape[0]
        h, vd = ref._heads(q_up, k_up, v_up, rope)
        nope = k_up.shape[1] // h
        q = (x @ q_down @ q_up).reshape(b, s, h, nope + rope)
        latent = x @ kv_down
        k_nope = (latent[..., :kvl] @ k_up).reshape(b, s, h, nope)
        v = (latent[..., :kvl] @ v_up).reshape(b, s, h, vd)
        freqs = 1.0 / ref.ROPE_THETA ** (jnp.arange(0, rope, 2, dtype=jnp.float32) / rope)
        angles = jnp.outer(jnp.arange(s, dtype=jnp.float32), freqs)
        cos, sin = jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype)
        k_pe = jnp.broadcast_to(latent[:, :, None, kvl:], (b, s, h, rope))
        q = jnp.concatenate([q[..., :nope], ref.rotate(q[..., nope:], cos, sin)], axis=-1)
        k = jnp.concatenate([k_nope, ref.rotate(k_pe, cos, sin)], axis=-1)
        def pad(t):
            return jnp.pad(t, ((0, 0), (0, 0), (0, 0), (0, 256 - t.shape[-1]))).transpose(0, 2, 1, 3)

        out = flash.flash_attention(pad(q), pad(k), pad(v), causal=True, sm_scale=(nope + rope) ** -0.5,
                                    block_sizes=sizes)
        return out[..., :vd].transpose(0, 2, 1, 3).reshape(b, s, h * vd) @ o_proj

    shapes = jax.eval_shape(lambda: ref.get_inputs(size="full")[0])
    return mla, list(shapes)


def expert_6p():
    paged = _lib("paged_attention.paged_attention_kernel")
    return (lambda q, kp, vp, lengths, pages: paged.paged_attention(q, kp, vp, lengths, pages,
                                                                   pages_per_compute_block=128),
            [jax.ShapeDtypeStruct((64, 64, 128), jnp.bfloat16), *[jax.ShapeDtypeStruct((8, 16384, 16, 128),
                                                                                       jnp.bfloat16)] * 2,
             jax.ShapeDtypeStruct((64,), jnp.int32), jax.ShapeDtypeStruct((64, 256), jnp.int32)])


def expert_7p():
    rpa = _lib("ragged_paged_attention.kernel")
    return (lambda q, kv, lens, pages, cu, n: rpa.ragged_paged_attention(
        q, kv, lens, pages, cu, n, sm_scale=128 ** -0.5, num_kv_pages_per_block=64, num_queries_per_block=64,
        vmem_limit_bytes=32 << 20),
            [jax.ShapeDtypeStruct((4096, 64, 128), jnp.bfloat16), jax.ShapeDtypeStruct((16384, 16, 16, 128),
                                                                                      jnp.bfloat16),
             jax.ShapeDtypeStruct((64,), jnp.int32), jax.ShapeDtypeStruct((64, 256), jnp.int32),
             jax.ShapeDtypeStruct((65,), jnp.int32), jax.ShapeDtypeStruct((1,), jnp.int32)])


def expert_8p():
    """JAXBench's tuned tiled matmul: blocks (1024, 2048), K blocks of 1024, the f32 accumulator written out at
    every K step (written here in the same form)."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_ref, y_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] = acc_ref[...] + jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    def matmul(x, y):
        (m, k), n = x.shape, y.shape[1]
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, grid=(m // 1024, n // 2048, k // 1024),
            in_specs=[pl.BlockSpec((1024, 1024), lambda i, j, kk: (i, kk)),
                      pl.BlockSpec((1024, 2048), lambda i, j, kk: (kk, j))],
            out_specs=pl.BlockSpec((1024, 2048), lambda i, j, kk: (i, j)),
            scratch_shapes=[pltpu.VMEM((1024, 2048), jnp.float32)]),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")))(x, y)

    return matmul, [jax.ShapeDtypeStruct((8192, 8192), jnp.bfloat16), jax.ShapeDtypeStruct((8192, 28672), jnp.bfloat16)]


def expert_11p():
    gmm = _lib("megablox.gmm")
    return (lambda lhs, rhs, sizes: gmm.gmm(lhs, rhs, sizes, preferred_element_type=lhs.dtype, tiling=(256, 1024, 1024)),
            [jax.ShapeDtypeStruct((32768, 4096), jnp.bfloat16), jax.ShapeDtypeStruct((128, 4096, 1536), jnp.bfloat16),
             jax.ShapeDtypeStruct((128,), jnp.int32)])


#: JAXBench workload -> (builder, whether the optimized variant computes the baseline's workload: the speed
#: ratio of the two is like for like only then; 4p's optimized variant runs a batched, larger problem).
EXPERTS = {"1p_Flash_Attention": (lambda suite: expert_1p(), True),
           "2p_GQA_Attention": (lambda suite: _splash_gqa(4, 128, 8, bshd=True), True),
           "3p_MLA_Attention": (expert_3p, True),
           "4p_Sparse_Attention": (lambda suite: _splash_gqa(4, 64, 8, bshd=False), False),
           "6p_Paged_Attention": (lambda suite: expert_6p(), True),
           "7p_Ragged_Paged_Attention": (lambda suite: expert_7p(), True),
           "8p_GEMM": (lambda suite: expert_8p(), True), "11p_Megablox_GMM": (lambda suite: expert_11p(), True)}


def reference_matmul_flops(folder: Path) -> float:
    """The matmul FLOPs of a task's reference traced at full size: what sizes a kernel's run-time trip counts
    in the cost model (as the judge's ``matmul_floor`` does for a candidate)."""
    from maxkernel_pallas_judge.judge.work import work_stats

    fn, shapes = _reference_program(folder)
    return float(work_stats(jax.make_jaxpr(fn)(*shapes))["glue_flops"])


def expert_points(suite: Path, log=print) -> list[dict[str, Any]]:
    """Each expert kernel described for v6e against its published time; one that runs its task's workload
    carries the reference's matmul work (``reference_flops``), which sizes its run-time loops."""
    measured = {p["workload"]: p["seconds"] for p in load_data("jaxbench_v6e")["points"] if p["variant"] == "optimized"}
    points = []
    for task, (build, same_workload) in EXPERTS.items():
        log(f"  {task} (expert)")
        fn, shapes = build(suite)
        work = {"reference_flops": reference_matmul_flops(suite / task)} if same_workload else {}
        points.append({"source": "jaxbench_v6e_experts", "id": task, "target": "v6e", "measured_s": measured[task],
                       "cls": operator_class(task), "same_workload": same_workload, "dispatch": False,
                       "scheduler": False, **describe(fn, shapes, "v6e"), **work})
    return points


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")
