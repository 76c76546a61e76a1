"""The trusted reference job has time limits and says which one it hit: past the whole job's limit the task
fails naming the stage it was stuck in; past the limit on XLA's compile (only XLA's estimate needs it) the
task is judged without XLA's figures, and the verdict says so."""

from __future__ import annotations

import textwrap
import time

import pytest
from maxkernel_core import Candidate, EvalStatus, TaskError

from maxkernel_pallas_judge import tasks
from maxkernel_pallas_judge.judge.evaluator import Evaluator
from maxkernel_pallas_judge.sandbox.pool import Limits
from maxkernel_tpu_pallas.tpu_platform import TPU

from .conftest import TASKS, kernel_source

pytestmark = pytest.mark.slow


def hanging_task(folder):
    folder.mkdir()
    (folder / "kernel_task.yaml").write_text("task_id: hangs\natol: 1.0e-3\nrtol: 1.0e-3\n")
    (folder / "reference.py").write_text(textwrap.dedent('''
        import jax.numpy as jnp

        def get_inputs(dtype=jnp.float32):
            while True:  # a reference that never returns its inputs
                pass

        def computation(x):
            return x
    '''))
    return tasks.load_task_at(folder)


def test_a_reference_that_hangs_fails_within_its_limit_naming_the_stage(tmp_path):
    evaluator = Evaluator(Limits(platform=TPU.spec), fresh_inputs=1, spares=0, reference_timeout_s=20)
    start = time.monotonic()
    try:
        with pytest.raises(TaskError) as err:
            evaluator.reference(hanging_task(tmp_path / "hangs"), "v5e")
    finally:
        evaluator.close()
    assert time.monotonic() - start < 60
    message = str(err.value)
    assert "did not finish within 20 s" in message and "stuck during full-size shapes" in message
    assert "reference_timeout_s" in message  # and how to change it


def test_past_the_compile_limit_the_task_is_judged_without_xlas_estimate(tmp_path):
    evaluator = Evaluator(Limits(platform=TPU.spec), fresh_inputs=1, spares=0, reference_compile_timeout_s=0.001)
    try:
        task = tasks.load_task_at(TASKS / "rmsnorm")
        ref = evaluator.reference(task, "v5e")
        assert ref.xla["timed_out"] and ref.xla_seconds is None and ref.sets
        assert evaluator.pool._trusted == []  # each reference job has a worker of its own, gone after it
        ev = evaluator.evaluate(task, Candidate(task.id, kernel_source("honest_rmsnorm.py")), target="v5e")
    finally:
        evaluator.close()
    assert ev.status is EvalStatus.OK, ev.reason
    assert "ran past 0.001 s" in ev.details["xla_reference"]
