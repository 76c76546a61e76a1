"""The judge on honest kernels (positive controls) and on every kind of cheat we know (negative controls)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from maxkernel_core import Candidate, EvalStatus
from maxkernel_tpu_pallas.tpu_platform import TPU

from .conftest import kernel_source

pytestmark = pytest.mark.slow  # each case runs a real worker: JAX, libtpu compile, interpret mode


_VERDICTS: dict = {}


def judge(backend, task, kernel: str, target: str = "v5e"):
    """Evaluate a test kernel once per session (some compiles take many seconds)."""
    key = (task.id, kernel, target)
    if key not in _VERDICTS:
        _VERDICTS[key] = backend.evaluate(task, Candidate(task.id, kernel_source(kernel)), target=target)
    return _VERDICTS[key]


@pytest.mark.parametrize("task_name, kernel", [
    ("matmul", "honest_matmul.py"),
    ("matmul_bias_gelu", "honest_matmul_bias_gelu.py"),
    ("rmsnorm", "honest_rmsnorm.py"),
])
def test_honest_kernels_pass_every_check(tpu_backend, task_of, task_name, kernel):
    ev = judge(tpu_backend, task_of(task_name), kernel)
    assert ev.status is EvalStatus.OK, ev.reason
    assert [c.name for c in ev.checks] == ["load", "trace", "proof_of_kernel", "tpu_compile", "correctness"]
    assert all(c.passed for c in ev.checks)
    assert ev.test.input_sets == 4  # the task's own inputs and 3 fresh seeds
    assert "no TPU" in ev.details["timing"]  # no measured speed claimed on CPU ...
    assert ev.profile.estimated and ev.profile.source == "cost_model"  # ... only the labelled estimate
    assert ev.estimate.reference_seconds > 0 and ev.estimate.model.kernels[0].seconds > 0  # the breakdown, typed
    assert ev.details["compile"]["memory"]["argument_size_in_bytes"] > 0
    assert ev.details["vmem_bytes_estimate"][0] > 0


def test_v6e_target_compiles_too(tpu_backend, task_of):
    ev = judge(tpu_backend, task_of("matmul"), "honest_matmul.py", target="v6e")
    assert ev.ok and ev.details["compile"]["device_kind"] == "TPU v6 lite"


@pytest.mark.parametrize("kernel, status, reason", [
    ("cheat_no_pallas.py", EvalStatus.REJECTED, "no pallas_call"),
    ("cheat_jnp_outside_kernel.py", EvalStatus.REJECTED, "matmul/conv FLOPs .* run in jnp outside pallas_call"),
    # It only ever sees tracers: the program judged is the traced one, so its cache never serves an answer.
    ("cheat_cached_global.py", EvalStatus.OK, "input sets match"),
    # It answers its first trace otherwise than the later ones: the two full-size traces are not one program.
    ("cheat_zeros_after_first.py", EvalStatus.REJECTED, "traced another program at full size the second time"),
    ("cheat_fp8.py", EvalStatus.INCORRECT, "outside atol=0.002"),
    ("cheat_patches_libraries.py", EvalStatus.REJECTED, "replaces .*numpy.allclose.*time.perf_counter"),
    ("crash_os_exit.py", EvalStatus.CRASHED, "exited .*code 0.* during import"),
    ("crash_sys_exit.py", EvalStatus.CRASHED, r"sys.exit\(0\)"),
    ("crash_segfault.py", EvalStatus.CRASHED, "SIGSEGV.*segmentation fault"),
    ("compile_bad_block_shape.py", EvalStatus.COMPILE_ERROR, "divisible by 8 and 128"),
    ("compile_vmem_overflow.py", EvalStatus.COMPILE_ERROR, "Ran out of memory in memory space vmem"),
])
def test_cheats_and_failures_get_the_right_status(tpu_backend, task_of, kernel, status, reason):
    ev = judge(tpu_backend, task_of("matmul"), kernel)
    assert ev.status is status, ev.reason
    assert re.search(reason, ev.reason), ev.reason


def test_rmsnorm_done_in_jnp_around_a_copy_kernel_is_rejected(tpu_backend, task_of, tmp_path):
    (tmp_path / "k.py").write_text(
        "import jax, jax.numpy as jnp\nfrom jax.experimental import pallas as pl\n"
        "def _copy(a, o):\n    o[...] = a[...]\n"
        "def computation(x, w, eps):\n"
        "    xf = x.astype(jnp.float32)\n"
        "    y = (xf * jax.lax.rsqrt(jnp.mean(xf * xf, -1, keepdims=True) + eps) * w).astype(x.dtype)\n"
        "    return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct(y.shape, y.dtype))(y)\n")
    task = task_of("rmsnorm")
    ev = tpu_backend.evaluate(task, Candidate(task.id, (tmp_path / "k.py").read_text()), target="v5e")
    assert ev.status is EvalStatus.REJECTED and "of the arithmetic runs in jnp outside pallas_call" in ev.reason


def test_fake_report_changes_nothing_and_writes_nothing_outside_scratch(tpu_backend, task_of, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    ev = judge(tpu_backend, task_of("matmul"), "cheat_fake_report.py")
    assert ev.status is EvalStatus.INCORRECT
    assert not list(tmp_path.rglob("maxkernel_result.json"))
    assert not Path("/tmp/maxkernel_result.json").exists()


def test_compile_error_points_at_the_kernel_line(tpu_backend, task_of):
    ev = judge(tpu_backend, task_of("matmul"), "compile_bad_block_shape.py")
    compile_check = [c for c in ev.checks if c.name == "tpu_compile"][0]
    assert not compile_check.passed and compile_check.details["error"]["kind"] == "block_shape"
    source_lines = kernel_source("compile_bad_block_shape.py").splitlines()
    # Mosaic names the kernel function: the line is its definition
    assert source_lines[compile_check.details["error"]["line"] - 1].startswith("def _kernel(")
    assert "/maxkernel-worker-" not in ev.reason  # the scratch path is shown as candidate.py
    assert f"(candidate line {compile_check.details['error']['line']})" in ev.reason
    vmem = judge(tpu_backend, task_of("matmul"), "compile_vmem_overflow.py")
    error = [c for c in vmem.checks if c.name == "tpu_compile"][0].details["error"]
    assert error["kind"] == "vmem_overflow" and "Exceeded vmem capacity" in error["message"]
    assert len(error["message"]) < 1500  # trimmed to what matters, not the whole allocation dump


def test_infinite_loop_times_out_and_the_pool_goes_on(task_of):
    from maxkernel_pallas_judge.judge.evaluator import Evaluator
    from maxkernel_pallas_judge.sandbox.pool import Limits

    evaluator = Evaluator(Limits(timeout_s=20, platform=TPU.spec), fresh_inputs=1, spares=1)
    try:
        task = task_of("matmul")
        hung = evaluator.evaluate(task, Candidate(task.id, kernel_source("hang_infinite_loop.py")), target="v5e")
        assert hung.status is EvalStatus.TIMEOUT and "no verdict within 20 s" in hung.reason
        assert "stuck during trace" in hung.reason  # it says where it was stuck
        after = evaluator.evaluate(task, Candidate(task.id, kernel_source("honest_matmul.py")), target="v5e")
        assert after.ok, after.reason
    finally:
        evaluator.close()


def test_large_allocation_under_a_small_memory_limit_is_recorded(task_of):
    from maxkernel_pallas_judge.judge.evaluator import Evaluator
    from maxkernel_pallas_judge.sandbox.pool import Limits

    evaluator = Evaluator(Limits(timeout_s=120, memory_mb=4096, platform=TPU.spec), fresh_inputs=0, spares=0)
    try:
        task = task_of("rmsnorm")
        ev = evaluator.evaluate(task, Candidate(task.id, kernel_source("crash_big_allocation.py")), target="v5e")
        assert ev.status is EvalStatus.CRASHED and "out of memory (limit 4096 MiB beyond the warmed-up runtime)" in ev.reason, ev.reason
    finally:
        evaluator.close()


def test_worker_environment_has_no_api_keys_and_no_network(task_of, monkeypatch, tmp_path):
    from maxkernel_pallas_judge.judge.evaluator import Evaluator
    from maxkernel_pallas_judge.sandbox.pool import Limits

    monkeypatch.setenv("GEMINI_API_KEY", "secret-gemini")
    monkeypatch.setenv("OPENAI_API_KEY", "secret-openai")
    probe = kernel_source("honest_rmsnorm.py") + (
        "\nimport os, socket\n"
        "assert not any('API_KEY' in k for k in os.environ), 'a key reached the worker'\n"
        "assert os.environ['HOME'] == os.getcwd()\n"
        "try:\n    socket.create_connection(('127.0.0.1', 9), timeout=2)\nexcept OSError:\n    pass\n"
        "else:\n    raise AssertionError('network reachable')\n")
    evaluator = Evaluator(Limits(timeout_s=120, platform=TPU.spec), fresh_inputs=0, spares=0)
    try:
        task = task_of("rmsnorm")
        ev = evaluator.evaluate(task, Candidate(task.id, probe), target="v5e")
        assert ev.ok, ev.reason
    finally:
        evaluator.close()
