"""The offline synthesizer on KernelBench-style tasks: losses (one value from rows) and sizes derived for a
task without a small one, whose size-dependent constants must follow the derived size."""

from __future__ import annotations

from pathlib import Path

import pytest
from maxkernel_core import EvalStatus

from maxkernel_tpu_offline import synthesis
from maxkernel_pallas_judge.tasks import load_task_at

from ..tpu_pallas.conftest import HERE as TPU_TESTS
from .test_synthesizer import offline_session

KERNELBENCH = TPU_TESTS / "kernelbench"

LAYER_NORM = '''
import jax
import jax.numpy as jnp


class Model:
    def __init__(self, dim):
        self.gamma = jnp.ones((dim,))

    def forward(self, x):
        return (x - x.mean(axis=1, keepdims=True)) / jnp.sqrt(x.var(axis=1, keepdims=True) + 1e-5) * self.gamma


batch_size = 4096
dim = 16384


def get_inputs():
    return [jax.random.normal(jax.random.PRNGKey(0), (batch_size, dim))]


def get_init_inputs():
    return [dim]
'''


def test_a_loss_is_row_statistics_in_the_kernel_and_a_tail_on_them():
    synth = synthesis.synthesize(load_task_at(KERNELBENCH / "mse_loss.py"), "v5e")
    assert synth.analysis.template == "rowwise" and synth.analysis.tail_from is not None
    code = synth.module("mse_loss", {})
    assert "partial = out.reshape(" in code and "jnp.sum(partial)" in code
    assert "float(d * rows)" in code  # the mean's divisor follows the size


def test_constants_of_a_task_without_a_small_size_follow_the_derived_one(tmp_path):
    (tmp_path / "layer_norm.py").write_text(LAYER_NORM)
    synth = synthesis.synthesize(load_task_at(tmp_path / "layer_norm.py"), "v5e")
    bound = [e.literal_exprs for e in synth.analysis.program.eqns if e.literal_exprs]
    assert {"float(d)"} <= {text for exprs in bound for text in exprs.values()}, bound  # jnp.var's NaN is kept


@pytest.mark.slow
def test_a_synthesized_loss_kernel_passes_the_cascade(tmp_path):
    session, backend = offline_session(tmp_path, Path(KERNELBENCH / "mse_loss.py"))
    try:
        verdict = session.evaluate(session.implement(session.plan()))
        assert verdict.status is EvalStatus.OK, verdict.reason
    finally:
        backend.close()
