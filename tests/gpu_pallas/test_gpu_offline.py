"""The offline synthesizer's GPU templates: for the matmul + epilogue and attention families, the best-ranked
point's kernel lowers for CUDA (Triton) and passes the shared judge's interpret-mode check (the row-wise family
is the end-to-end run's, test_gpu_backend.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from maxkernel_core import Candidate, EvalStatus

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gpu_backend():
    from maxkernel_gpu_pallas.backend import GpuPallasBackend

    backend = GpuPallasBackend()
    yield backend
    backend.close()


@pytest.mark.parametrize("task_path, template", [
    ("tests/tpu_pallas/tasks/matmul_bias_gelu", "matmul_epilogue"),
    ("jaxbench/1p_Flash_Attention", "attention"),
])
def test_each_family_gets_a_gpu_kernel_that_lowers_and_is_correct(gpu_backend, task_path, template):
    from maxkernel_gpu_offline.synthesis import synthesize

    task = gpu_backend.load_task(str(REPO / task_path))
    s = synthesize(task, "h100")
    assert s.template == template
    point, est = s.ranked[0]
    assert est.fits_vmem and est.estimated and all(b.estimate_of(p) is not None for b in [s] for p, _ in s.ranked)
    assert [e.seconds for _, e in s.ranked if e.fits_vmem] == sorted(e.seconds for _, e in s.ranked if e.fits_vmem)
    source = s.module(task.id, point)
    assert "plgpu.CompilerParams(num_warps=NUM_WARPS" in source
    ev = gpu_backend.evaluate(task, Candidate(task.id, source), target="h100")
    assert ev.status is EvalStatus.OK, ev.reason
    assert {c.name for c in ev.checks} >= {"proof_of_kernel", "gpu_compile", "correctness"}
    assert ev.details["work"]["kernels"][0]["lowering"] == "triton"
    # Triton's rule: only power-of-2 tiles are offered; moves change one constant; a repair halves a tile
    assert all(v & (v - 1) == 0 for p, _ in s.ranked for k, v in p.items() if k.startswith("BLOCK"))
    assert all(label.split()[0] in point for label, _ in s.neighbours(point))
    smallest = {k: v[0] for k, v in s.declared_space().as_dict().items()} if hasattr(s.declared_space(), "as_dict") \
        else {p.name: p.values[0] for p in s.declared_space().parameters}
    assert s.shrink_largest(smallest) is None and s.shrink_largest(point) != point
