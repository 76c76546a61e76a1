"""The reference's estimate is the XLA model of its compiled program: a loop is charged every trip."""

from __future__ import annotations

import pytest

from maxkernel_pallas_judge.judge.evaluator import ReferenceData
from maxkernel_tpu_pallas.profiling.params import shipped_params
from maxkernel_tpu_pallas.tpu_platform import TPU

CHIP = {"mem_bw_bytes_per_second": 8.2e11, "bf16_ops_per_second": 1.97e14, "mxu_column_size": 128, "num_mxus": 4}


def gemm_op(trips: int) -> dict:
    return {"name": "fusion", "opcode": "fusion", "label": "dot", "trips": trips, "hbm_bytes": 6 * 2 ** 20,
            "dots": [{"m": 1024, "n": 1024, "k": 1024, "batch": 1, "count": 1, "dtype": "bfloat16"}],
            "elementwise": 0.0, "transcendental": 0.0, "steps": 1, "kernel": False}


def reference(ops, ok=True, optimal=1e-3) -> ReferenceData:
    xla = {"ok": ok, "chip": CHIP, "cost": {"optimal_seconds": optimal}, "program": {"ops": ops, "notes": []}}
    return ReferenceData([], (), {}, None, [], [], [], "cpu", xla=xla, target="v5e", judge_platform=TPU)


def test_a_loop_of_eight_trips_costs_eight_times_one():
    one, eight = reference([gemm_op(1)]).xla_seconds, reference([gemm_op(8)]).xla_seconds
    assert eight == pytest.approx(8 * one)
    # libtpu's optimal_seconds (a bare roofline, loops once) is kept for comparison and never used
    assert reference([gemm_op(8)], optimal=1e-9).xla_seconds == pytest.approx(eight)


def test_the_estimate_is_made_by_the_parameters_in_force():
    est = reference([gemm_op(1)]).xla_estimate
    assert est.params_source == shipped_params("v5e").source
    flops = 2 * 1024 ** 3
    assert est.seconds >= flops / (CHIP["bf16_ops_per_second"] * shipped_params("v5e").mxu_efficiency)


def test_no_compiled_program_means_no_estimate():
    assert reference([gemm_op(1)], ok=False).xla_seconds is None
    ref = ReferenceData([], (), {}, None, [], [], [], "cpu",
                        xla={"ok": True, "chip": CHIP, "cost": {}, "program": {"error": "x"}}, judge_platform=TPU)
    assert ref.xla_seconds is None
