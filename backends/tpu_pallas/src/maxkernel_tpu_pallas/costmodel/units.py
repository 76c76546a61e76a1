"""The TPU's units, one rule for every program: a Pallas kernel's grid step and an XLA fusion are costed alike.

A TensorCore has a matrix unit (MXU), a vector unit (VPU), a transcendental
unit (EUP) and DMA engines that move HBM <-> VMEM. They run concurrently: a
step's compute takes as long as its busiest unit (plus the share of the others'
time that does not hide, ``compute_serial``), and its copies overlap its
compute. Rates come from the chip table (peak FLOP/s, HBM bandwidth, MXU width)
and the fitted parameters (``params.ModelParams``).
"""

from __future__ import annotations

import math
from typing import Any

SUBLANES_32BIT = 8
LANES = 128
#: bf16 passes of an f32 matmul at each explicit precision (XLA's and Mosaic's bf16x3 / bf16x6 algorithms).
PASSES = {"HIGH": 3.0, "HIGHEST": 6.0}


def clock_hz(chip: dict[str, Any]) -> float:
    """The clock implied by the table: peak bf16 FLOP/s over the MXUs' multiply-adds per cycle."""
    return chip["bf16_ops_per_second"] / (chip["num_mxus"] * chip["mxu_column_size"] ** 2 * 2)


def pad(value: int, multiple: int) -> int:
    return math.ceil(value / multiple) * multiple if multiple > 0 else value


def passes_for(dtype: str, precision: str | None, params, *, default_f32: float | None = None) -> float:
    """bf16 passes one multiply-add of this operand dtype takes. An explicit HIGH/HIGHEST precision names its
    algorithm; otherwise f32 takes ``default_f32`` (XLA: 1, its default is one bf16 pass) or, in a Pallas kernel,
    the fitted ``f32_passes`` of Mosaic's default."""
    if dtype != "float32":
        return 1.0
    text = str(precision or "").upper()
    if "HIGHEST" in text:
        return PASSES["HIGHEST"]
    if "HIGH" in text:
        return PASSES["HIGH"]
    return float(params.f32_passes if default_f32 is None else default_f32)


def mxu_rate(dtype: str, chip: dict[str, Any], params) -> float:
    """Sustained multiply-add FLOP/s of the MXU for this operand dtype."""
    if "int8" in dtype and chip.get("int8_ops_per_second"):
        peak = chip["int8_ops_per_second"]
    elif "float8" in dtype and chip.get("fp8_ops_per_second"):
        peak = chip["fp8_ops_per_second"]
    else:
        peak = chip["bf16_ops_per_second"]
    return peak * params.mxu_efficiency


def padded_matmul_flops(m: int, n: int, k: int, chip: dict[str, Any], params) -> float:
    """FLOPs the MXU spends on an (m x k) @ (k x n) product: rows to the sublanes, K and N to the MXU's granules."""
    width = chip["mxu_column_size"]
    return 2.0 * pad(m, SUBLANES_32BIT) * pad(n, params.mxu_pad_n or width) * pad(k, params.mxu_pad_k or width)


def vpu_rate(chip: dict[str, Any], params) -> float:
    return params.elementwise_per_cycle * clock_hz(chip)


def eup_rate(chip: dict[str, Any], params) -> float:
    return params.transcendental_per_cycle * clock_hz(chip)


def hbm_seconds(nbytes: float, chip: dict[str, Any], params) -> float:
    return nbytes / (chip["mem_bw_bytes_per_second"] * params.dma_efficiency)


def compute_seconds(mxu_s: float, vpu_s: float, eup_s: float, params) -> float:
    """The units run at once: the busiest bounds the step, and ``compute_serial`` of the rest does not hide."""
    top = max(mxu_s, vpu_s, eup_s)
    return top + params.compute_serial * (mxu_s + vpu_s + eup_s - top)


def bound_of(parts: dict[str, float]) -> str:
    return max(parts, key=parts.get) if parts else "none"
