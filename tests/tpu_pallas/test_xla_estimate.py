"""The reference's estimate is the XLA model of its compiled program: a loop is charged every trip."""

from __future__ import annotations

import attrs
import pytest

from maxkernel_pallas_judge.judge.evaluator import ReferenceData
from maxkernel_tpu_pallas.costmodel.params import shipped_params
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


def test_programs_are_compiled_with_the_layouts_a_device_gives_their_arguments_and_results():
    """Arguments arrive, and results leave, row-major on a device, so a transpose at either end of a program is a
    copy there; a deviceless compile left to choose the entry layouts made 18k's NCHW output transpose free
    (its reference estimate 1.09 ms, 1.88 ms with the copy; JAXBench measured 1.77 ms on a v6e)."""
    import re

    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import SingleDeviceSharding

    from maxkernel_tpu_pallas.platform.compile import device_jit, target_device

    def program(x, w):  # 18k's shape of program: NCHW in and out, the convolution in NHWC
        y = lax.conv_general_dilated(jnp.transpose(x, (0, 2, 3, 1)), jnp.transpose(w, (2, 3, 1, 0)), (1, 1), "VALID",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.transpose(y, (0, 3, 1, 2))

    device = target_device("v6e")
    sharding = SingleDeviceSharding(device)
    args = [jax.ShapeDtypeStruct(s, jnp.bfloat16, sharding=sharding) for s in ((8, 64, 66, 66), (128, 64, 3, 3))]
    with jax.default_device(device):
        text = device_jit(program, args, sharding).lower(*args).compile().as_text()
    entry = text.split("entry_computation_layout=", 1)[1].split("allow_spmd", 1)[0]
    layouts = [[int(d) for d in m.split(",")] for m in re.findall(r"\w\[[\d,]+\]\{([\d,]+)", entry)]
    assert len(layouts) == 3 and all(m == sorted(m, reverse=True) for m in layouts), entry


def test_a_run_time_grid_is_sized_by_the_lesser_count_of_the_references_matmul_work():
    """The traced count (ragged_dot: each row meets one group) and the exported program's (XLA's CPU lowering
    meets every group): the floor is the lesser, what the reference needs; either alone when the other is missing."""
    def floor(traced, exported):
        return attrs.evolve(reference([gemm_op(1)]), work=traced, program_work=exported).matmul_floor

    assert floor({"glue_flops": 1e9}, [{"glue_flops": 8e9}]) == 1e9
    assert floor({"glue_flops": 3e9}, [{"glue_flops": 2e9}]) == 2e9  # dead code the export dropped
    assert floor({}, [{"glue_flops": 2e9}]) == 2e9
    assert floor({}, []) is None
