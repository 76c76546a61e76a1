"""The profiler role and `maxkernel profile`: estimates labelled as such, XLA's estimate of the reference."""

from __future__ import annotations

import json

import pytest
from maxkernel_core import Candidate, RunConfig
from maxkernel_core.plugins import get_plugin_manager
from maxkernel_core.session import RunSession
from maxkernel_core.store import RunStore

from ..helpers import run_cli
from .conftest import KERNELS, TASKS, kernel_source

pytestmark = pytest.mark.slow


def test_profile_cli_prints_estimates_and_xla_reference(tmp_path):
    result = run_cli("profile", "--task", str(TASKS / "matmul"), "--kernel", str(KERNELS / "honest_matmul.py"),
                     "--target", "v6e")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for expected in ("cost model (ESTIMATE)", "traffic per BlockSpec", "XLA reference (estimate, same model)",
                     "(estimated / estimated)", "XLA reference (ESTIMATE)", "not measured: no TPU attached",
                     "Diagnosis", "TPU v6 lite", "32 MiB scoped limit", "model parameters"):
        assert expected in out, expected


def test_a_kernel_that_does_not_compile_gets_no_speed_and_advice_bounded_by_the_chip():
    result = run_cli("profile", "--task", str(TASKS / "matmul"), "--kernel", str(KERNELS / "compile_bad_block_shape.py"),
                     "--json")
    data = json.loads(result.stdout)
    assert result.returncode == 1 and data["status"] == "compile_error"
    assert data["cost_model"] is None and data["measured"] is None  # no estimate of a kernel that does not compile
    text = run_cli("profile", "--task", str(TASKS / "matmul"), "--kernel", str(KERNELS / "compile_vmem_overflow.py"),
                   "--target", "v6e")
    out = text.stdout
    assert text.returncode == 1 and "No speed: the kernel does not compile for v6e" in out
    assert "roofline (estimate)" not in out and "estimated time" not in out and "speedup" not in out
    # 176 MiB of blocks on a chip with 128 MiB: shrink, never "raise the limit to 256 MiB"
    assert "the chip has only 128 MiB of VMEM: shrink the blocks" in out and "256" not in out


def test_profiler_role_through_the_session(tmp_path):
    pm = get_plugin_manager()
    backend_cls = pm.registries.get("backend", "tpu_pallas").cls
    backend = backend_cls()
    try:
        task = backend.load_task(TASKS / "rmsnorm")
        session = RunSession(pm, RunStore(tmp_path / "runs.db"), task, RunConfig(task.id, target="v5e"), backend)
        candidate = Candidate(task.id, kernel_source("honest_rmsnorm.py"))
        verdict = session.evaluate(candidate)  # agent_test: the sandboxed cascade
        assert verdict.ok, verdict.reason
        profile = session.profile(candidate)  # agent_profile: from that evaluation, not a second run
        assert profile.estimated and profile.source == "cost_model" and profile.bound == "memory"
        assert profile.reference_seconds and profile.speedup and profile.model.seconds == profile.seconds
        assert any("VMEM" in line for line in profile.diagnosis)
        assert [role for role, _, _ in session.role_log.calls] == ["test", "profile"]
        assert session.best().evaluation.profile.seconds == profile.seconds
    finally:
        backend.close()


def test_profile_without_a_kernel_estimates_the_xla_reference_op_by_op():
    result = run_cli("profile", "--task", str(TASKS / "matmul"), "--target", "v6e")
    assert result.returncode == 0, result.stderr
    for expected in ("XLA reference (ESTIMATE)", "matmul precision default (as jax.jit runs it); the task's tolerance needs high",
                     "costliest ops", "not measured: no TPU",
                     "libtpu's own optimal_seconds"):
        assert expected in result.stdout, expected
    data = json.loads(run_cli("profile", "--task", str(TASKS / "matmul"), "--target", "v6e", "--json").stdout)
    ref = data["reference"]["estimate"]
    assert ref["estimated"] is True and ref["seconds"] > 0 and ref["top_ops"][0]["unit"] == "mxu"
    assert ref["precision"]["passes"] == 3 and data["reference"]["measured_s"] is None


def test_a_kernels_speedup_divides_two_estimates_of_the_same_kind():
    data = json.loads(run_cli("profile", "--task", str(TASKS / "matmul"), "--kernel",
                              str(KERNELS / "honest_matmul.py"), "--target", "v6e", "--json").stdout)
    model = data["cost_model"]
    assert model["speedup_kind"] == "estimated/estimated" and model["params_source"].startswith("shipped")
    assert model["speedup_vs_xla"] == pytest.approx(model["xla_reference_seconds"] / model["seconds"])
    assert data["reference"]["seconds"] == pytest.approx(model["xla_reference_seconds"])
