"""Attacks on the judge, one or more per class of docs/evaluation.md, each judged not ok; the honest kernel
judged right after them in the same pool is still ok, and nothing an attack started outlives it."""

from __future__ import annotations

import json
import os
import re
import socket
import time
import uuid
from pathlib import Path

import pytest
from maxkernel_core import Candidate, EvalStatus
from maxkernel_tpu_pallas.tpu_platform import TPU

from .conftest import KERNELS

ATTACKS = Path(__file__).parent / "attacks"


def attack_source(name: str, **fill: str) -> str:
    text = (ATTACKS / name).read_text()

    def include(match: re.Match) -> str:
        body = (KERNELS / match[1]).read_text()
        return re.sub(r"^def computation\(", f"def {match[2]}(", body, flags=re.M)

    text = re.sub(r"^# @include (\S+) as (\w+)$", include, text, flags=re.M)
    for key, value in fill.items():
        text = text.replace(f"__{key}__", value)
    return text


def judge_attack(backend, task, name: str, **fill: str):
    return backend.evaluate(task, Candidate(task.id, attack_source(name, **fill)), target="v5e")


@pytest.fixture(scope="module")
def gemm(task_of):
    return task_of("matmul_bias_gelu")


@pytest.mark.parametrize("attack, reason", [
    ("phantom_branch_work.py", r"matmul/conv FLOPs .* run in jnp outside pallas_call"),
    ("loop_hidden_gemm.py", r"matmul/conv FLOPs .*data-dependent loop"),
    ("static_loop_gemm.py", r"matmul/conv FLOPs .* run in jnp outside pallas_call"),
    ("unknown_primitive_gemm.py", r"triangular_solve outside pallas_call"),
    ("size_switch.py", r"at check size 1"),
    ("patch_judge_modules.py", r"replaces .*maxkernel_pallas_judge\.judge"),
    ("swap_code_objects.py", r"replaces .*maxkernel_pallas_judge\.judge.*tripwire"),
])
def test_hidden_work_switched_programs_and_patches_are_rejected(tpu_backend, gemm, attack, reason):
    ev = judge_attack(tpu_backend, gemm, attack)
    assert ev.status is EvalStatus.REJECTED, (ev.status, ev.reason)
    assert re.search(reason, ev.reason), ev.reason


def test_the_kernel_must_own_the_owned_operation_not_just_as_many_flops(tpu_backend):
    """MLA's task lets its projections stay in XLA (kernel_owns: attention); a candidate that runs the
    projections in a Pallas kernel and the attention in jnp is refused all the same."""
    task = tpu_backend.load_task(Path(__file__).resolve().parents[2] / "jaxbench" / "3p_MLA_Attention")
    ev = judge_attack(tpu_backend, task, "owned_scope_swap.py")
    assert ev.status is EvalStatus.REJECTED, (ev.status, ev.reason)
    assert re.search(r"matmul/conv FLOPs .* run in jnp outside pallas_call", ev.reason), ev.reason


def test_a_module_that_only_behaves_while_traced_is_judged_on_its_traced_program(tpu_backend, gemm):
    """It is only ever traced: the program checked is the honest one it traced, the one compiled and timed."""
    ev = judge_attack(tpu_backend, gemm, "stack_detector.py")
    assert ev.ok, ev.reason
    assert ev.details["work"]["kernel_flops"] >= 2 * 2048 * 4096 * 8192  # the GEMM is in the checked program


def test_no_concrete_input_exists_for_a_candidate_to_read(tpu_backend, gemm):
    ev = judge_attack(tpu_backend, gemm, "frame_reader.py")
    assert ev.status is EvalStatus.INCORRECT, ev.reason


def test_forged_worker_messages_decide_nothing(tpu_backend, gemm):
    ev = judge_attack(tpu_backend, gemm, "forge_protocol.py")
    assert not ev.ok, ev.reason
    assert ev.status in (EvalStatus.REJECTED, EvalStatus.CRASHED, EvalStatus.INCORRECT), ev.reason


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass
    return found


@pytest.mark.skipif(not __import__("shutil").which("bwrap"), reason="needs bubblewrap (make installs it)")
def test_a_daemon_dies_with_its_evaluation_and_touches_no_other_worker(tpu_backend, gemm, tmp_path):
    marker, mark_file = f"maxkernel-daemon-{uuid.uuid4().hex}", tmp_path / "escaped"
    ev = judge_attack(tpu_backend, gemm, "daemon_escape.py", MARKER=marker, MARK_FILE=str(mark_file))
    # its kernel is honest: the process it leaves running is what is refused
    assert ev.status is EvalStatus.REJECTED and "left process" in ev.reason, ev.reason
    assert ev.details["sandbox"] == "bwrap"
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_with(marker), "the candidate's daemon outlived its evaluation"
    honest = tpu_backend.evaluate(gemm, Candidate(gemm.id, (KERNELS / "honest_matmul_bias_gelu.py").read_text()),
                                  target="v5e")
    assert honest.ok, honest.reason
    assert not mark_file.exists()


@pytest.mark.skipif(not __import__("shutil").which("bwrap"), reason="needs bubblewrap (make installs it)")
def test_a_worker_sees_no_orchestrator_no_other_worker_no_run_store_no_network(gemm, tmp_path, monkeypatch):
    from maxkernel_pallas_judge.judge.evaluator import Evaluator
    from maxkernel_pallas_judge.sandbox.pool import Limits

    home = tmp_path / "home"
    home.mkdir()
    (home / "runs.db").write_text("the run store")
    monkeypatch.setenv("MAXKERNEL_HOME", str(home))
    monkeypatch.setenv("GEMINI_API_KEY", "sekrit-orchestrator-key")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    evaluator = Evaluator(Limits(timeout_s=120, platform=TPU.spec), fresh_inputs=0, spares=1)
    try:
        source = attack_source("sandbox_probe.py", MAXKERNEL_HOME=str(home), PORT=str(listener.getsockname()[1]))
        ev = evaluator.evaluate(gemm, Candidate(gemm.id, source), target="v5e")
    finally:
        evaluator.close()
        listener.close()
    found = json.loads(re.search(r"PROBE(.*)PROBE", ev.reason)[1])
    assert ev.details["sandbox"] == "bwrap"
    assert len(found["pids"]) <= 2, found  # bwrap's init and the worker: nothing else exists for it
    assert not found["secrets"] and found["env_keys"] == [], found
    assert found["workers"] == 0 and found["home"] is False, found  # not even the spare warming beside it
    assert found["net"] != "connected", found


def test_honest_kernels_after_every_attack_in_the_same_pool(tpu_backend, gemm, task_of):
    """Runs last in this module: whatever the attacks above did to their workers, checkers and scratch
    folders, the honest kernels are judged ok by the same pool."""
    for task, kernel in ((gemm, "honest_matmul_bias_gelu.py"), (task_of("rmsnorm"), "honest_rmsnorm.py")):
        ev = tpu_backend.evaluate(task, Candidate(task.id, (KERNELS / kernel).read_text()), target="v5e")
        assert ev.ok, ev.reason
