"""Calls in a reference's jaxpr (jit, custom_jvp such as jax.nn.relu) are inlined before a template is chosen."""

from __future__ import annotations

import re

from ..helpers import REPO

OFFLINE_TASKS = REPO / "tests" / "offline" / "tasks"
from .test_synthesizer import offline_session


def test_a_reference_calling_jax_nn_relu_gets_the_matmul_epilogue_template(tmp_path):
    # jax.nn.relu is a custom_jvp around a `jit` call: the relu must be seen as an epilogue op.
    session, backend = offline_session(tmp_path, REPO / "jaxbench" / "41k_Gemm_Add_ReLU")
    try:
        plan = session.plan()
        assert plan.decisions["template"] == "matmul_epilogue", plan.summary
        assert "max" in session.implement(plan).code
    finally:
        backend.close()


def test_a_batch_template_that_cannot_fit_vmem_gives_way_to_staged_kernels(tmp_path):
    # Retention-like, f32: two matmuls without a softmax, so the batch fallback takes it, but its [S, S]
    # decay weight (256 MiB) goes whole to every block, far over VMEM at any block: only its matmuls go
    # on kernels, and the plan says why.
    folder = tmp_path / "retention"
    folder.mkdir()
    (folder / "kernel_task.yaml").write_text("task_id: retention_f32\natol: 0.01\nrtol: 0.01\n")
    (folder / "reference.py").write_text(
        "import jax\nimport jax.numpy as jnp\n\n"
        "def get_inputs(dtype=jnp.float32):\n"
        "    k = jax.random.key(0)\n"
        "    return (jax.random.normal(k, (4, 8192, 128), dtype), jax.random.normal(k, (8192, 8192), dtype)), ()\n\n"
        "def computation(x, decay):\n"
        "    s = jnp.einsum('bqd,bkd->bqk', x, x, preferred_element_type=jnp.float32) * decay\n"
        "    return jnp.einsum('bqk,bkd->bqd', jnp.tril(s), x, preferred_element_type=jnp.float32)\n")
    session, backend = offline_session(tmp_path, folder)
    try:
        plan = session.plan()
        assert plan.decisions["template"] == "staged"
        assert re.search(r"the batch template needs [\d,]+ MiB of VMEM", plan.decisions["why"])
    finally:
        backend.close()


def test_a_bf16_matmul_result_keeps_the_reference_out_of_one_batch_kernel(tmp_path):
    # 15p (retention, bf16): the batch kernel would run the reference's own bf16 matmuls, and Mosaic's MXU
    # accumulates in 32 bits only ("Expected matmul acc to be 32-bit"): staged kernels instead.
    session, backend = offline_session(tmp_path, REPO / "jaxbench" / "15p_RetNet_Retention")
    try:
        plan = session.plan()
        assert plan.decisions["template"] == "staged"
        assert "a matmul with a bfloat16 result" in plan.decisions["why"]
    finally:
        backend.close()


def test_a_template_that_cannot_fit_vmem_at_any_block_declines_with_the_sizes(tmp_path):
    import pytest

    from maxkernel_synthesis.task import OfflineDeclined

    # A whole-row softmax over 2^22 float32 columns: 16 MiB a row, 8 rows at the least (a block of
    # the sublane tile) is 128 MiB before double-buffering, and no matmul for staged kernels.
    folder = tmp_path / "wide_softmax"
    folder.mkdir()
    (folder / "kernel_task.yaml").write_text("task_id: wide_softmax\natol: 0.01\nrtol: 0.01\n")
    (folder / "reference.py").write_text(
        "import jax\nimport jax.numpy as jnp\n\n"
        "def get_inputs(dtype=jnp.float32):\n"
        "    return (jax.random.normal(jax.random.key(0), (64, 1 << 22), dtype),), ()\n\n"
        "def computation(x):\n    return jax.nn.softmax(x, axis=-1)\n")
    session, backend = offline_session(tmp_path, folder)
    try:
        with pytest.raises(OfflineDeclined, match=r"rowwise template does not fit: even its smallest blocks need [\d,]+ MiB"):
            session.plan()
    finally:
        backend.close()


def test_a_static_scalar_converted_in_the_epilogue_is_emitted_as_an_array(tmp_path):
    # leaky_relu(y, negative_slope) with the slope a static argument: the jaxpr converts the
    # Python float, and `0.1.astype(...)` is not Python.
    session, backend = offline_session(tmp_path, OFFLINE_TASKS / "gemm_leaky_relu_static")
    try:
        code = session.implement(session.plan()).code
        compile(code, "candidate.py", "exec")
        assert "jnp.asarray(0.1, jnp.float32)" in code
    finally:
        backend.close()


def test_exact_gelu_is_emitted_with_erf_which_pallas_tpu_lowers(tmp_path):
    # jax.nn.gelu(approximate=False) traces to erfc, which has no Pallas TPU lowering.
    session, backend = offline_session(tmp_path, OFFLINE_TASKS / "gemm_exact_gelu")
    try:
        code = session.implement(session.plan()).code
        assert "jax.lax.erfc" not in code and "1.0 - jax.lax.erf(" in code
    finally:
        backend.close()
