"""XLA's estimate of the reference is raised when its cost analysis missed loop trips."""

from __future__ import annotations

import pytest

from maxkernel_tpu_pallas.judge.evaluator import ReferenceData

CHIP = {"mem_bw_bytes_per_second": 8.1e11, "bf16_ops_per_second": 1.97e14}


def reference(xla_flops: float, traced_flops: int) -> ReferenceData:
    xla = {"ok": True, "chip": CHIP, "cost": {"flops": xla_flops, "optimal_seconds": 1e-3}}
    return ReferenceData([], (), {"glue_flops": traced_flops}, None, [], [], [], "cpu", xla=xla)


def test_a_loop_counted_once_by_xla_gets_the_traced_work_as_a_floor():
    # A lax.map of 8 chunks: XLA counts one chunk's matmuls, the jaxpr all eight; the traced 8e12
    # FLOPs at the MXU's peak take 40.6 ms, more than XLA's 1 ms.
    assert reference(1e12, 8_000_000_000_000).xla_seconds == pytest.approx(8e12 / 1.97e14)


def test_the_floor_does_not_multiply_work_outside_the_loop():
    # A gather before a scan over tiles: XLA's 1 ms is mostly memory outside the loop, and the
    # missed matmul trips (8e9 FLOPs, 41 us at peak) do not make it 8 ms.
    assert reference(1e9, 8_000_000_000).xla_seconds == pytest.approx(1e-3)


def test_agreeing_counts_leave_xla_estimate_alone():
    assert reference(1e9, 1_100_000_000).xla_seconds == pytest.approx(1e-3)
    assert reference(0.0, 5).xla_seconds == pytest.approx(1e-3)
