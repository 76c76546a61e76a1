"""Calls in a reference's jaxpr (jit, custom_jvp such as jax.nn.relu) are inlined before a template is chosen."""

from __future__ import annotations

from ..helpers import REPO
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
