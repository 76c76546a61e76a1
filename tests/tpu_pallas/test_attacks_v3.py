"""Judge v3 (issue 44): one attack or more per class, each judged not ok, and the honest kernels still ok.

1. a different program handed over than ``computation`` traces; 2. a CPU program unlike the TPU program;
3. a full-size program unlike the check-size one; 4. work-accounting holes; 5. kernels exact in Pallas' plain
interpreter and wrong on a TPU; 6. a forged estimate. The candidates are in ``attacks_v3/``."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from maxkernel_core import Candidate, EvalStatus

from .conftest import KERNELS

pytestmark = pytest.mark.slow  # real workers
ATTACKS = Path(__file__).parent / "attacks_v3"


def source(name: str) -> str:
    """An attack's module, with ``# @include FILE as NAME`` pasted from the honest kernels."""
    def include(match: re.Match) -> str:
        return re.sub(r"^def computation\(", f"def {match[2]}(", (KERNELS / match[1]).read_text(), flags=re.M)

    path = ATTACKS / name if (ATTACKS / name).exists() else KERNELS / name  # the kernels' own chip-only one
    return re.sub(r"^# @include (\S+) as (\w+)$", include, path.read_text(), flags=re.M)


def judge(backend, task, name: str):
    return backend.evaluate(task, Candidate(task.id, source(name)), target="v5e")


@pytest.mark.parametrize("attack, status, reason", [
    ("custom_primitive.py", EvalStatus.REJECTED, r"primitive 'maxkernel_fast_gemm' that jax does not define"),
    ("platform_branch.py", EvalStatus.REJECTED, r"selects its computation by platform"),
    ("first_trace_differs.py", EvalStatus.REJECTED, r"traced another program at full size the second time"),
    ("named_like_a_kernel.py", EvalStatus.REJECTED, r"matmul/conv FLOPs .* run in jnp outside pallas_call"),
    ("wrapping_counter.py", EvalStatus.REJECTED, r"matmul/conv FLOPs .*data-dependent loop"),
    ("contraction_as_sum.py", EvalStatus.REJECTED, r"matmul/conv FLOPs .* run in jnp outside pallas_call"),
])
def test_programs_and_work_the_candidate_writes_are_refused(tpu_backend, task_of, attack, status, reason):
    ev = judge(tpu_backend, task_of("matmul_bias_gelu"), attack)
    assert ev.status is status, (ev.status, ev.reason)
    assert re.search(reason, ev.reason), ev.reason


def test_a_cpu_lowering_of_its_own_changes_nothing(tpu_backend, task_of):
    """Its rule would make every kernel right on the CPU; the checker lowers with its own rules, so the kernel
    is judged as it is (a quarter of K short), if the integrity check has not refused it first."""
    ev = judge(tpu_backend, task_of("matmul_bias_gelu"), "cpu_lowering_rule.py")
    assert ev.status in (EvalStatus.INCORRECT, EvalStatus.REJECTED), (ev.status, ev.reason)


@pytest.mark.parametrize("attack", ["revisited_output_block.py", "dma_read_before_wait.py", "out_of_bounds_slice.py",
                                    "aliased_input_read_late.py", "chip_reads_unwritten_scratch.py"])
def test_kernels_the_plain_interpreter_passes_and_a_tpu_fails_are_incorrect(tpu_backend, task_of, attack):
    """Each is exact in Pallas' plain interpreter with the interpreter's own fill (tests/tpu_pallas/
    test_attacks_v3.py's premise, checked in test_the_plain_interpreter_alone_passes_them); the checker's
    TPU-semantics run with hostile memory refuses it."""
    ev = judge(tpu_backend, task_of("matmul"), attack)
    assert ev.status is EvalStatus.INCORRECT, (ev.status, ev.reason)
    assert re.search(r"wrong result|TPU-semantics interpreter", ev.reason), ev.reason
    # the checker that ran it retires (its failed run may leave callbacks behind): it must not be kept, or the
    # next candidate's check finds it gone (a crash under load, where its exit lags)
    time.sleep(1)
    assert all(w.proc.poll() is None for w in tpu_backend.evaluator.pool._checkers)


@pytest.mark.parametrize("attack", ["revisited_output_block.py", "dma_read_before_wait.py", "out_of_bounds_slice.py",
                                    "aliased_input_read_late.py", "chip_reads_unwritten_scratch.py"])
def test_the_plain_interpreter_alone_passes_them(attack):
    """The premise of the test above: in Pallas' plain interpreter, with its own fill of uninitialised memory,
    each of these kernels computes the right matmul (so only the chip's semantics tell them apart)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import pallas as pl

    module: dict = {}
    exec(compile(source(attack), attack, "exec"), module)
    x, y = (jnp.asarray(np.random.default_rng(i).standard_normal(s), jnp.float32)
            for i, s in enumerate([(256, 512), (512, 512)]))
    real = pl.pallas_call
    module["pl"].pallas_call = lambda *a, **k: real(*a, **{**k, "interpret": True})
    try:
        got = jax.jit(module["computation"])(x, y)
    finally:
        module["pl"].pallas_call = real
    np.testing.assert_allclose(np.asarray(got), np.asarray(x) @ np.asarray(y), rtol=1e-4, atol=1e-3)


def test_a_forged_kernel_description_does_not_change_the_estimate(tpu_backend, task_of):
    task = task_of("matmul_bias_gelu")
    forged = judge(tpu_backend, task, "forge_estimate.py")
    honest = tpu_backend.evaluate(task, Candidate(task.id, (KERNELS / "honest_matmul_bias_gelu.py").read_text()),
                                  target="v5e")
    assert forged.ok and honest.ok, (forged.reason, honest.reason)
    assert forged.estimate.seconds == pytest.approx(honest.estimate.seconds)
    assert [k.name for k in forged.estimate.model.kernels] != ["forged"]
