"""The GPU Pallas backend on a CPU-only host: the shared one-program judge with the GPU's Platform.

Honest Triton-lowered kernels are judged ok (lowered for CUDA, correct in interpret mode, an estimate labelled
one); a block Triton refuses is a compile error with the candidate's line; the attacks on the shared judge are
judged not ok for the same reasons as on the TPU backend.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from maxkernel_core import Candidate, EvalStatus

from tests.helpers import run_cli
from tests.tpu_pallas.test_attacks import ATTACKS

HERE = Path(__file__).parent
KERNELS = HERE / "kernels"
TASKS = HERE.parent / "tpu_pallas" / "tasks"


@pytest.fixture(scope="module")
def gpu_backend():
    from maxkernel_gpu_pallas.backend import GpuPallasBackend

    backend = GpuPallasBackend()
    yield backend
    backend.close()


def _task(backend, name: str):
    return backend.load_task(str(TASKS / name))


def _judge(backend, task, source: str):
    return backend.evaluate(task, Candidate(task.id, source), target="h100")


def _attack(name: str) -> str:
    """An attack of the shared judge's suite with the GPU's honest kernel pasted where it carries one."""
    text = (ATTACKS / name).read_text()

    def include(match: re.Match) -> str:
        body = (KERNELS / match[1]).read_text()
        return re.sub(r"^def computation\(", f"def {match[2]}(", body, flags=re.M)

    return re.sub(r"^# @include (\S+) as (\w+)$", include, text, flags=re.M)


@pytest.mark.parametrize("task, kernel", [("matmul_bias_gelu", "honest_matmul_bias_gelu.py"),
                                          ("rmsnorm", "honest_rmsnorm.py")])
def test_honest_gpu_kernels_are_lowered_for_cuda_and_correct(gpu_backend, task, kernel):
    t = _task(gpu_backend, task)
    ev = _judge(gpu_backend, t, (KERNELS / kernel).read_text())
    assert ev.status is EvalStatus.OK, ev.reason
    checks = {c.name: c for c in ev.checks}
    assert checks["gpu_compile"].passed and "lowered for CUDA" in checks["gpu_compile"].message
    assert "not compiled to machine code: no GPU" in checks["gpu_compile"].message  # never claimed on CPU
    assert "in Pallas interpret mode on CPU" in ev.reason
    assert ev.details["work"]["kernels"][0]["lowering"] == "triton"
    est = ev.estimate
    assert est is not None and est.estimated and est.source == "cost_model" and est.seconds > 0
    assert est.reference_seconds and est.model.params_source.startswith("datasheet roofline")
    assert est.model.chip["name"].startswith("NVIDIA H100")
    assert "not held against a GPU measurement" in est.diagnosis[-1]
    assert ev.profile is None or ev.profile.estimated  # no device time without a GPU
    if task == "matmul_bias_gelu":  # the checker read the Triton IR: 2*M*N*K of the K loop's dots, over the grid
        m, k, n = 2048, 4096, 8192
        assert ev.details["work"]["kernel_flops"] == 2 * m * k * n
        assert ev.details["work"]["kernels"][0]["grid"] == [m // 64, n // 128]


def test_a_block_triton_refuses_is_a_compile_error_with_the_candidate_line(gpu_backend):
    t = _task(gpu_backend, "matmul_bias_gelu")
    honest = (KERNELS / "honest_matmul_bias_gelu.py").read_text()
    source = honest.replace("BM, BN, BK = 64, 128, 32", "BM, BN, BK = 48, 128, 32")  # 48 rows: not a power of 2
    assert source != honest
    ev = _judge(gpu_backend, t, source)
    assert ev.status is EvalStatus.COMPILE_ERROR, ev.reason
    assert "power of 2" in ev.reason and "(48, 32)" in ev.reason
    line = ev.compile_error.line
    assert line is not None and "pl.ds(i * BK, BK)" in source.splitlines()[line - 1]


@pytest.mark.parametrize("attack, status, reason", [
    ("size_switch.py", EvalStatus.REJECTED, r"at check size 1"),
    ("patch_judge_modules.py", EvalStatus.REJECTED, r"replaces .*maxkernel_pallas_judge\.judge"),
    ("swap_code_objects.py", EvalStatus.REJECTED, r"replaces .*maxkernel_pallas_judge\.judge.*tripwire"),
    ("frame_reader.py", EvalStatus.INCORRECT, r""),
    ("forge_protocol.py", None, r""),
    # written with TPU-shaped kernels: Pallas lowers them with Mosaic GPU, which refuses them before any proof
    ("phantom_branch_work.py", EvalStatus.COMPILE_ERROR, r"Mosaic GPU|Unimplemented primitive"),
    ("unknown_primitive_gemm.py", None, r""),
])
def test_the_shared_judges_attacks_are_not_ok_on_the_gpu_backend(gpu_backend, attack, status, reason):
    t = _task(gpu_backend, "matmul_bias_gelu")
    ev = _judge(gpu_backend, t, _attack(attack))
    assert ev.status is not EvalStatus.OK, ev.reason
    if status is not None:
        assert ev.status is status and re.search(reason, ev.reason), (ev.status, ev.reason)


def test_a_gemm_left_in_jnp_around_a_triton_epilogue_is_rejected(gpu_backend):
    t = _task(gpu_backend, "matmul_bias_gelu")
    ev = _judge(gpu_backend, t, (KERNELS / "cheat_jnp_outside_kernel.py").read_text())
    assert ev.status is EvalStatus.REJECTED, ev.reason
    assert re.search(r"matmul/conv FLOPs .* run in jnp outside pallas_call", ev.reason)


def test_a_module_that_only_behaves_while_traced_is_judged_on_its_traced_program(gpu_backend):
    t = _task(gpu_backend, "matmul_bias_gelu")
    ev = _judge(gpu_backend, t, _attack("stack_detector.py"))
    assert ev.ok, ev.reason
    assert ev.details["work"]["kernel_flops"] >= 2 * 2048 * 4096 * 8192  # the GEMM is in the checked program


def test_the_backend_is_listed_with_its_distribution_and_refuses_tpu_targets():
    listed = run_cli("plugins", env={"COLUMNS": "300"})
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if "gpu_pallas" in line)
    assert "maxkernel-gpu-pallas" in row and "backend:gpu_pallas" in row
    from maxkernel_core import ConfigError
    from maxkernel_gpu_pallas.backend import GpuPallasBackend

    with pytest.raises(ConfigError, match=r"unknown GPU target 'v5e': use one of h100, h200"):
        GpuPallasBackend().check_target("v5e")


def test_run_with_the_offline_provider_end_to_end_writes_a_verified_gpu_kernel(tmp_path):
    """``maxkernel run --backend gpu_pallas --provider offline``: the GPU templates, judged by the shared judge."""
    out = tmp_path / "out"
    result = run_cli("run", "--task", str(TASKS / "rmsnorm"), "--backend", "gpu_pallas", "--target", "h200",
                     "--provider", "offline", "--strategy", "auto", "--budget", "1", "--out", str(out), "--json",
                     env={"MAXKERNEL_HOME": str(tmp_path / "home")}, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    assert (summary["status"], summary["target"], summary["evaluations"]) == ("ok", "h200", 1)
    kernel = (out / "kernel.py").read_text()
    assert "from jax.experimental.pallas import triton as plgpu" in kernel and "GPU template: rowwise" in kernel
    assert "pltpu" not in kernel
    report = json.loads((out / "report.json").read_text())
    best = report["result"]["best"]["evaluation"]["estimate"]
    assert best["estimated"] and "lowered for CUDA" in best["estimate_basis"]
    assert "perfect fusion" in best["reference_basis"]
    assert "lowered for CUDA" in report["headline"]
    assert "h200" in result.stderr and "lowered for CUDA and modelled from datasheet figures" in result.stderr
    # the kernel's header says how to judge it again, and that command does
    assert "maxkernel eval --task test_rmsnorm --kernel kernel.py --backend gpu_pallas --target h200" in kernel
    again = run_cli("eval", "--task", str(TASKS / "rmsnorm"), "--kernel", str(out / "kernel.py"), "--backend",
                    "gpu_pallas", "--target", "h200", "--json", env={"MAXKERNEL_HOME": str(tmp_path / "home")},
                    timeout=600)
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "ok", again.stderr[-2000:]
