"""The cost model's breakdown (``Profile.model``) is read back the way the run store reads it before the verdict
keeps it: its numbers come from the candidate's program, and one the store could not read back leaves the
verdict without an estimate (the judge's guard, ``Verdict.modelled``), never a row no run can open again."""

from __future__ import annotations

import pytest
from maxkernel_core import ModelBreakdown, Profile, from_json, to_json
from maxkernel_pallas_judge.profiling.records import CostEstimate, KernelCost, OperandCost, as_breakdown


def _estimate(grid, steps=4) -> CostEstimate:
    operand = OperandCost("in", 0, [128, 128], "float32", 1 << 16, 1 << 16, 4, 1 << 16, None)
    kernel = KernelCost("k", grid, steps, [operand], 1 << 16, 2e6, 2e6, 0.0, 0.0, 1 << 16, 16 << 20, 1,
                        1e-6, 2e-6, 1e-7, 2.1e-6)
    return CostEstimate("v5e", [kernel], 2.1e-6, 1 << 16, 2e6, 1e-6, {"device_kind": "TPU v5 lite"})


def test_a_grid_axis_known_only_at_run_time_reads_back_as_none():
    """A GPU kernel's grid may hold an axis of run-time size (None): the record says so and the store reads it."""
    made = as_breakdown(_estimate([None, 4]))
    assert made.kernels[0].grid == (None, 4) and made.kernels[0].operands[0].refetch == 1.0
    profile = Profile("c", "cost_model", True, 2.1e-6, 4e-6, model=made)
    assert from_json(to_json(profile), Profile).model == made


def test_a_breakdown_the_store_could_not_read_back_raises_in_the_judges_guard():
    with pytest.raises(Exception):  # cattrs: a KernelTime's steps must be an int
        as_breakdown(_estimate([2, 2], steps=None))


def test_the_breakdown_is_the_figure_the_model_made():
    made = as_breakdown(_estimate([2, 2]))
    assert isinstance(made, ModelBreakdown) and made.seconds == 2.1e-6 and made.kernels[0].bound == "compute"
    assert made.chip == {"device_kind": "TPU v5 lite"}
