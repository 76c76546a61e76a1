"""GroupNorm after a matmul, fused: statistics over groups of a row taken in the matmul's epilogue (groups.py),
and the epilogue's temporaries counted so the fit check rules out the tiles libtpu refuses (liveness.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from maxkernel_core import EvalStatus

from maxkernel_synthesis.analysis import analyse
from maxkernel_synthesis.ir import trace_reference
from maxkernel_tpu_offline.staged.template import last_resort

from .test_synthesizer import offline_session

JAXBENCH = Path(__file__).parents[2] / "jaxbench"


#: 40k's ending: the row minimum of the normalised row, broadcast with a per-channel bias into (1, C, B, 1)
ROW_MIN_TAIL = "jnp.min(g.reshape(h.shape) * gamma + beta, axis=1, keepdims=True).reshape(1, 1, -1, 1) + bias"


def _group_norm_task(tmp_path: Path, group: int, tail: str = "g.reshape(h.shape) * gamma + beta") -> Path:
    """x @ W, then GroupNorm over groups of ``group`` features, as the JaxBench GroupNorm tasks write it (and a
    (1, C, 1, 1) bias, which only 40k's ending reads)."""
    folder = tmp_path / f"matmul_groupnorm_{group}"
    folder.mkdir()
    (folder / "kernel_task.yaml").write_text(
        "task_id: matmul_groupnorm\ndescription: x @ W, SiLU, GroupNorm\ninput_gen_code: get_inputs in reference.py\n"
        "atol: 0.05\nrtol: 0.05\n")
    (folder / "reference.py").write_text(
        "import jax\nimport jax.numpy as jnp\n\n"
        "SIZES = {'full': (512, 512, 1536), 'small': (64, 256, 768)}\n"
        f"GROUP_SIZE = {group}\n\n"
        "def get_inputs(dtype=jnp.bfloat16, size='full', seed=0):\n"
        "    m, k, n = SIZES[size]\n"
        "    keys = jax.random.split(jax.random.key(seed), 5)\n"
        "    x = jax.random.normal(keys[0], (m, k), dtype)\n"
        "    w = (jax.random.normal(keys[1], (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)\n"
        "    gamma = 1.0 + 0.1 * jax.random.normal(keys[2], (n,), dtype)\n"
        "    beta = 0.1 * jax.random.normal(keys[3], (n,), dtype)\n"
        "    bias = jax.random.normal(keys[4], (1, n, 1, 1), dtype)\n"
        "    return (x, w, gamma, beta, bias), ()\n\n"
        "def computation(x, w, gamma, beta, bias):\n"
        "    h = jax.nn.silu(jnp.matmul(x, w))\n"
        "    g = h.reshape(h.shape[0], -1, GROUP_SIZE)\n"
        "    g = (g - jnp.mean(g, axis=-1, keepdims=True)) / jnp.sqrt(jnp.var(g, axis=-1, keepdims=True) + 1e-5)\n"
        f"    return {tail}\n")
    return folder


def _analysis(folder: Path):
    import importlib.util

    import jax

    spec = importlib.util.spec_from_file_location(f"groups_{folder.name}", folder / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args, static = module.get_inputs()
    shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
    return analyse(trace_reference(module.computation, shapes, static), last_resort)  # the TPU's, as it synthesizes


@settings(max_examples=12, deadline=None)
@given(log_group=st.integers(1, 8), tiles=st.integers(1, 2), op=st.sampled_from(["sum", "max", "min"]),
       dtype=st.sampled_from(["float32", "bfloat16"]), seed=st.integers(0, 2**16))
def test_group_reduce_gives_every_lane_its_groups_statistic(log_group, tiles, op, dtype, seed):
    """The butterfly in a Pallas kernel (interpret mode) against numpy, for groups of 2 to 256 lanes in tiles
    of one or two lane widths (a group as wide as the tile, and groups narrower than a vector register)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    from maxkernel_tpu_offline.group_reduce import group_reduce

    group = 2 ** log_group
    width = max(128, group) * tiles
    x = jax.random.normal(jax.random.key(seed), (16, width), jnp.float32).astype(dtype)

    def kernel(x_ref, o_ref):
        o_ref[...] = group_reduce(x_ref[...], op, group)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                         interpret=pltpu.InterpretParams())(x)
    grouped = np.asarray(x, np.float64).reshape(16, width // group, group)
    expected = {"sum": np.sum, "max": np.max, "min": np.min}[op](grouped, axis=-1, keepdims=True)
    expected = np.broadcast_to(expected, grouped.shape).reshape(16, width)
    tolerance = 0 if op != "sum" else (1e-5 if dtype == "float32" else 0.02) * group
    np.testing.assert_allclose(np.asarray(out, np.float64), expected, atol=tolerance, rtol=0.01 if op == "sum" else 0)


def test_group_norm_after_a_matmul_is_an_epilogue_with_whole_groups_per_tile(tmp_path):
    a = _analysis(_group_norm_task(tmp_path, 32))
    # the mean, and jnp.var's own mean and sum of squares
    assert a.template == "matmul_epilogue" and a.group == 32 and len(a.group_reductions) == 3
    assert a.reductions == 0 and "groups of 32 features" in a.why  # no full-row block is needed


def test_a_row_statistic_after_the_groups_is_taken_per_tile_and_its_broadcast_left_to_xla(tmp_path):
    """40k: the row minimum is split over N tiles (combined after the kernel), and the broadcast into the
    (1, C, B, 1) output runs on the per-row values in XLA, so N need not be one block."""
    a = _analysis(_group_norm_task(tmp_path, 16, ROW_MIN_TAIL))
    assert a.template == "matmul_epilogue" and a.group == 16 and a.tile_reduction == "reduce_min"
    assert a.tail_from is not None and not a.full_rows and "run on those 512 values in XLA" in a.why


@pytest.mark.parametrize("group, tail, reason", [
    (48, "g.reshape(h.shape) * gamma + beta", "groups of 48 features"),
    (32, "jnp.sum(jnp.mean(g, axis=-1), axis=-1)", "mixes rows"),  # a statistic across the groups
])
def test_groups_the_epilogue_cannot_take_are_declined_with_the_reason(tmp_path, group, tail, reason):
    a = _analysis(_group_norm_task(tmp_path, group, tail))
    assert a.template != "matmul_epilogue" and reason in a.why


@pytest.mark.slow
@pytest.mark.parametrize("group, tail", [(32, None), (16, ROW_MIN_TAIL)])
def test_a_fused_group_norm_kernel_passes_the_cascade_on_v6e(tmp_path, group, tail):
    task = _group_norm_task(tmp_path, group, *([tail] if tail else []))
    session, backend = offline_session(tmp_path, task, "v6e")
    try:
        plan = session.plan()
        assert plan.decisions["template"] == "matmul_epilogue" and plan.parameters["FULL_ROWS"] == 0
        candidate = session.implement(plan)
        kernel_part = candidate.code.split("def computation")[0]
        assert "def _group_reduce(" in candidate.code and "_group_reduce(" in kernel_part.split("def _matmul")[1]
        assert "bn = n if FULL_ROWS else _block(n, BLOCK_N, 128)" in candidate.code  # whole groups in a lane tile
        if tail:  # each N tile's row minimum, then their minimum and the broadcast, after the kernel
            assert "pl.Squeezed(), bm, 1" in candidate.code and "jnp.min(out, axis=0)" in candidate.code
            assert "(1, 1, m, 1)" in candidate.code.split("def computation")[1]  # the tail's shape follows the size
        verdict = session.evaluate(candidate)
        assert verdict.status is EvalStatus.OK, verdict.reason
    finally:
        backend.close()


@pytest.mark.slow
def test_a_group_norm_alone_is_row_wise_with_the_same_butterfly_on_v5e(tmp_path):
    """No matmul: the row-wise template takes the group statistics the same way (whole rows per block)."""
    folder = tmp_path / "groupnorm"
    folder.mkdir()
    (folder / "kernel_task.yaml").write_text("task_id: groupnorm\ndescription: GroupNorm over groups of 64\n"
                                             "input_gen_code: get_inputs in reference.py\natol: 1e-4\nrtol: 1e-4\n")
    (folder / "reference.py").write_text(
        "import jax\nimport jax.numpy as jnp\n\nSIZES = {'full': (4096, 1024), 'small': (64, 512)}\n\n"
        "def get_inputs(dtype=jnp.float32, size='full', seed=0):\n"
        "    return (jax.random.normal(jax.random.key(seed), SIZES[size], dtype),), ()\n\n"
        "def computation(x):\n"
        "    g = x.reshape(x.shape[0], -1, 64)\n"
        "    g = (g - g.mean(-1, keepdims=True)) * jax.lax.rsqrt(g.var(-1, keepdims=True) + 1e-5)\n"
        "    return jnp.maximum(g.reshape(x.shape), 0.0)\n")
    session, backend = offline_session(tmp_path, folder, "v5e")
    try:
        plan = session.plan()
        assert plan.decisions["template"] == "rowwise"
        candidate = session.implement(plan)
        assert "_group_reduce(" in candidate.code.split("def _rowwise_kernel")[1]
        verdict = session.evaluate(candidate)
        assert verdict.status is EvalStatus.OK, verdict.reason
    finally:
        backend.close()


def test_the_epilogue_temporaries_rule_out_the_tile_libtpu_refused():
    """45k's 2048x2048 tile compiled to 82.8 MiB of Mosaic scratch beside its blocks, past v6e's 96 MiB limit;
    its 1024x2048 tile compiles. The fit check now says so before any compile."""
    from maxkernel_pallas_judge import tasks
    from maxkernel_tpu_offline.synthesis import synthesize

    synthesis = synthesize(tasks.load_task_at(JAXBENCH / "45k_Gemm_GroupNorm_Swish_Multiply_Swish"), "v6e")
    fixed = {"FULL_ROWS": 0, "VMEM_LIMIT_BYTES": 96 << 20}
    refused = synthesis.estimate_of({"BLOCK_M": 2048, "BLOCK_N": 2048, "BLOCK_K": 512, **fixed})
    compiled = synthesis.estimate_of({"BLOCK_M": 1024, "BLOCK_N": 2048, "BLOCK_K": 2048, **fixed})
    assert not synthesis.fits(refused) and synthesis.fits(compiled)
    assert synthesis.fits(synthesis.ranked[0][1])


def test_the_gpu_templates_decline_group_statistics_with_the_reason():
    from maxkernel_gpu_offline.synthesis import synthesize as synthesize_gpu
    from maxkernel_pallas_judge import tasks
    from maxkernel_synthesis.task import OfflineDeclined

    with pytest.raises(OfflineDeclined, match="groups of 64 features"):
        synthesize_gpu(tasks.load_task_at(JAXBENCH / "29k_Matmul_Swish_Sum_GroupNorm"), "h100")
