"""Expert-written Pallas kernels of the published JaxBench operators are judged ok on v5e and v6e (3p and 7p: v6e).

Each is written here from its published algorithm (tests/tpu_pallas/experts/): flash attention, GQA, MLA with
its projections left to XLA, paged and ragged paged attention (scalar prefetch, pl.ANY, DMA semaphores, a
trace-time get_tpu_info()), megablox GMM (a grid axis sized at run time) and the tuned GEMM. A judge that
refuses what experts write is wrong, not strict; every attack of test_attacks.py stays refused beside these.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from maxkernel_core import Candidate, EvalStatus

from ..jaxbench.test_tasks import CHECKED_BY_EXPERT_TESTS, check_reference
from .conftest import EXPERTS, kernel_source

pytestmark = pytest.mark.slow
JAXBENCH = Path(__file__).resolve().parents[2] / "jaxbench"

EXPERT_KERNELS = [
    ("1p_Flash_Attention", "flash_attention.py"),
    ("2p_GQA_Attention", "gqa_attention.py"),
    ("3p_MLA_Attention", "mla_attention.py"),
    ("6p_Paged_Attention", "paged_attention.py"),
    ("7p_Ragged_Paged_Attention", "ragged_paged_attention.py"),
    ("8p_GEMM", "tuned_gemm.py"),
    ("11p_Megablox_GMM", "megablox_gmm.py"),
]


#: Judged on v6e only (JAXBench's timings are from v6e): their references take 45-95 s a target to build and
#: compile, and the suite has a 25-minute budget; v5e lowering is exercised by the other five kernels.
V6E_ONLY = {"3p_MLA_Attention", "7p_Ragged_Paged_Attention"}


#: Judged in make test: one of each thing experts write that a judge could refuse (flash attention's blocks, paged
#: attention's scalar prefetch, pl.ANY and DMA semaphores, the GMM's grid axis sized at run time). The other
#: kernels and targets are per-task checks: CI runs them with the JaxBench data (make test-jaxbench).
IN_SUITE = {("1p_Flash_Attention", "v5e"), ("6p_Paged_Attention", "v5e"), ("11p_Megablox_GMM", "v5e")}


def _cases():
    for task_id, kernel in EXPERT_KERNELS:
        for target in ("v5e", "v6e"):
            if target == "v6e" or task_id not in V6E_ONLY:
                marks = () if (task_id, target) in IN_SUITE else (pytest.mark.jaxbench_full,)
                yield pytest.param(task_id, kernel, target, marks=marks, id=f"{task_id}-{kernel}-{target}")


@pytest.mark.parametrize("task_id, kernel, target", list(_cases()))
def test_expert_kernel_is_judged_ok(tpu_backend, task_id, kernel, target):
    task = tpu_backend.load_task(JAXBENCH / task_id)
    ev = tpu_backend.evaluate(task, Candidate(task.id, kernel_source(kernel, EXPERTS)), target=target)
    assert ev.status is EvalStatus.OK, ev.reason
    assert [c.name for c in ev.checks] == ["load", "trace", "proof_of_kernel", "tpu_compile", "correctness"]
    # The cost model reads what experts write (semaphores, pl.ANY DMAs, run-time grids): an estimate, labelled.
    assert ev.estimate is not None and ev.estimate.estimated, ev.details.get("no_estimate")
    assert ev.estimate.seconds > 0
    if target == "v6e":  # the reference this judged against is the one the JaxBench task tests would build
        assert task_id in CHECKED_BY_EXPERT_TESTS
        check_reference(task_id, tpu_backend.evaluator.reference(task, "v6e"))  # cached: not built again
