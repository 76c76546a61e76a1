"""NVIDIA GPUs a candidate can be judged for, with the datasheet figures the roofline estimate reads.

On a CPU-only machine nothing can ask a GPU for its figures, so they are the
vendor's published numbers, each with its source; dense rates (NVIDIA's
datasheets print the sparse ones, twice these). A GPU host's
``jax.devices()[0].device_kind`` is recorded beside them when one is attached.
"""

from __future__ import annotations

from typing import Any

from maxkernel_core import ConfigError

_HOPPER_SXM = {
    "architecture": "Hopper (sm_90)",
    "num_sms": 132,
    "bf16_flops_per_second": 989.4e12,  # dense BF16/FP16 Tensor Core
    "tf32_flops_per_second": 494.7e12,  # dense TF32 Tensor Core (an f32 dot at Triton's default precision)
    "fp32_flops_per_second": 66.9e12,  # CUDA cores, an FMA counted as two
    # 16 special-function results per clock per SM (CUDA C++ Programming Guide, arithmetic throughput table,
    # compute capability 9.0) at the 1.98 GHz boost clock
    "transcendentals_per_second": 132 * 16 * 1.98e9,
    "smem_per_sm_bytes": 228 * 1024,
    "smem_per_block_bytes": 227 * 1024,  # the most one thread block (one Pallas program) may take
    "l2_bytes": 50 * 2**20,
}
_SOURCES = ("NVIDIA H100 Tensor Core GPU datasheet (SXM5); NVIDIA Hopper Tuning Guide (shared memory: 228 KB per "
            "SM, 227 KB per thread block); CUDA C++ Programming Guide (SFU throughput)")

TARGETS: dict[str, dict[str, Any]] = {
    "h100": {**_HOPPER_SXM, "name": "NVIDIA H100 SXM5 80GB", "hbm_bytes_per_second": 3.35e12,
             "hbm_capacity_bytes": 80 * 10**9, "source": _SOURCES},
    "h200": {**_HOPPER_SXM, "name": "NVIDIA H200 SXM 141GB", "hbm_bytes_per_second": 4.8e12,
             "hbm_capacity_bytes": 141 * 10**9,
             "source": _SOURCES.replace("H100 Tensor Core GPU datasheet (SXM5)", "H200 Tensor Core GPU datasheet")},
}
DEFAULT_TARGET = "h100"


def check_target(target: str) -> str:
    if target not in TARGETS:
        raise ConfigError(f"unknown GPU target {target!r}: use one of {', '.join(TARGETS)} (--target or run.target)")
    return target


def chip_figures(target: str) -> dict[str, Any]:
    """The target's figures, with their source (a copy: callers may annotate it)."""
    return dict(TARGETS[check_target(target)])
