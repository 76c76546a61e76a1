"""XLA's estimate of the reference is scaled up when its cost analysis missed loop trips."""

from __future__ import annotations

import pytest

from maxkernel_tpu_pallas.judge.evaluator import ReferenceData

CHIP = {"mem_bw_bytes_per_second": 8.1e11, "bf16_ops_per_second": 1.97e14}


def reference(xla_flops: float, traced_flops: int) -> ReferenceData:
    xla = {"ok": True, "chip": CHIP, "cost": {"flops": xla_flops, "optimal_seconds": 1e-3}}
    return ReferenceData([], (), {"glue_flops": traced_flops}, None, [], [], [], "cpu", xla=xla)


def test_a_loop_counted_once_by_xla_is_scaled_to_the_traced_work():
    # A lax.map of 8 chunks: XLA counts one chunk's matmuls, the jaxpr all eight.
    assert reference(1e9, 8_000_000_000).xla_seconds == pytest.approx(8e-3)


def test_agreeing_counts_leave_xla_estimate_alone():
    assert reference(1e9, 1_100_000_000).xla_seconds == pytest.approx(1e-3)
    assert reference(0.0, 5).xla_seconds == pytest.approx(1e-3)
