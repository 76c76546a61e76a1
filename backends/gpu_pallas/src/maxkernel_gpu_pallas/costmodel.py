"""A roofline estimate of Pallas kernels on a Hopper GPU: an estimate from datasheet figures, never calibrated.

It reads the same kernel descriptions as the TPU model (``extract.py``: grid,
blocks, the body's dots and element-ops per program) and returns the same
records (``CostEstimate``), so the verdict, the report and the search treat
both alike. Per kernel:

* **HBM traffic**: every Pallas GPU program reads its input blocks and writes
  its output block. Programs of one wave (as many as the GPU has SMs) share
  what they re-read through L2, so an operand costs at most its whole array
  once per wave: ``min(block x programs, array x waves)``.
* **Compute**: dots at the Tensor Core rate of their input dtype (bf16/f16;
  f32 at TF32, Triton's default for an f32 dot), element-ops on the CUDA
  cores, transcendentals on the special-function units; a grid that is not a
  whole number of waves pays for the last wave's idle SMs.
* **On-chip memory**: a program's dot tiles times the pipeline stages plus its
  f32 accumulator (kernels with dots), else its blocks; held against the 227
  KB one thread block may take.
* **Launch**: a fixed ``LAUNCH_S`` per kernel (an assumption, not a measurement).

Time is ``max(memory, compute) + launch``. It has not been held against any
GPU measurement yet (docs/gpu.md): read its figures as a roofline, not a time.
"""

from __future__ import annotations

import math
from typing import Any

from attrs import define
from maxkernel_pallas_judge.profiling.records import CostEstimate, KernelCost, OperandCost

#: Launch and tail cost per kernel, seconds (an assumption stated in docs/gpu.md).
LAUNCH_S = 4e-6
#: Software-pipeline stages a Triton kernel keeps of its dot tiles (Pallas's default num_stages is 3).
STAGES = 3
SOURCE = "datasheet roofline (not calibrated against a GPU measurement)"
_TENSOR_DTYPES = {"bfloat16": "bf16_flops_per_second", "float16": "bf16_flops_per_second",
                  "float32": "tf32_flops_per_second"}


def _dot_rate(dtype: str, chip: dict[str, Any]) -> float:
    return float(chip[_TENSOR_DTYPES.get(dtype, "fp32_flops_per_second")])


def _operands(desc: dict[str, Any], steps: int, waves: int) -> list[OperandCost]:
    out = []
    for op in desc["operands"]:
        block = math.prod(op["block_shape"] or [1]) * op["itemsize"]
        array = math.prod(op["array_shape"] or [1]) * op["itemsize"]
        hbm = min(block * steps, array * waves) if op.get("pipelined", True) else array
        out.append(OperandCost(op["role"], op["index"], list(op["block_shape"]), op["dtype"], hbm, array, steps,
                               block, op.get("depends_on")))
    return out


def _smem(desc: dict[str, Any], operands: list[OperandCost]) -> int:
    dots = desc["body"]["dots"]
    if not dots:
        return sum(o.vmem_bytes for o in operands)
    itemsize = {"bfloat16": 2, "float16": 2}.get(dots[0]["dtype"], 4)
    return max(STAGES * (d["m"] * d["k"] + d["k"] * d["n"]) * itemsize + 4 * d["m"] * d["n"] for d in dots)


def kernel_cost(desc: dict[str, Any], chip: dict[str, Any]) -> KernelCost:
    steps = int(desc["steps"]) * int(desc.get("repeat", 1))
    sms = int(chip["num_sms"])
    waves = max(math.ceil(steps / sms), 1)
    idle = waves * sms / max(steps, 1)  # the last wave's idle SMs (and a grid smaller than the GPU)
    operands = _operands(desc, steps, waves)
    body = desc["body"]
    dots = [{**d, "flops": 2.0 * d["m"] * d["n"] * d["k"] * d["batch"] * d["runs"]} for d in body["dots"]]
    flops = sum(d["flops"] for d in dots) * steps
    mxu_s = sum(d["flops"] * steps / _dot_rate(d["dtype"], chip) for d in dots) * idle
    vpu_s = body["elementwise_runs"] * steps / (chip["fp32_flops_per_second"] / 2) * idle
    eup_s = body["transcendental_runs"] * steps / chip["transcendentals_per_second"] * idle
    hbm = sum(o.hbm_bytes for o in operands)
    memory_s = hbm / chip["hbm_bytes_per_second"]
    compute_s = max(mxu_s, vpu_s + eup_s)
    ideal = sum(d["flops"] * steps / _dot_rate(d["dtype"], chip) for d in dots)
    return KernelCost(
        name=desc.get("name", "kernel"), grid=list(desc["grid"]), steps=steps, operands=operands, hbm_bytes=hbm,
        flops=flops, mxu_flops_padded=flops, elementwise=body["elementwise_runs"] * steps,
        transcendental=body["transcendental_runs"] * steps, vmem_bytes=_smem(desc, operands),
        vmem_limit_bytes=int(chip["smem_per_block_bytes"]), cores_used=min(steps, sms), memory_s=memory_s,
        compute_s=compute_s, overhead_s=LAUNCH_S, seconds=max(memory_s, compute_s) + LAUNCH_S,
        ideal_compute_s=ideal, dots=dots, mxu_s=mxu_s, vpu_s=vpu_s, eup_s=eup_s)


def estimate(kernels: list[dict[str, Any]], chip: dict[str, Any], target: str) -> CostEstimate:
    costs = [kernel_cost(k, chip) for k in kernels]
    min_bytes = sum(o.array_bytes for k in costs for o in k.operands)
    ideal = max(min_bytes / chip["hbm_bytes_per_second"], sum(k.ideal_compute_s for k in costs))
    return CostEstimate(target, costs, sum(k.seconds for k in costs), sum(k.hbm_bytes for k in costs),
                        sum(k.flops for k in costs), ideal, chip, params_source=SOURCE)


@define
class XlaRoofline:
    """XLA's reference on the GPU by the same roofline, credited with perfect fusion: every input read once,
    every output written once, every FLOP at the Tensor Core rate of its dtype, one launch per dot."""

    seconds: float
    flops: float
    bytes: float
    launches: int
    dtype: str

    def as_dict(self, top: int = 8) -> dict[str, Any]:
        return {"seconds": self.seconds, "flops": self.flops, "hbm_bytes": self.bytes, "launches": self.launches,
                "dtype": self.dtype, "estimated": True, "model": "roofline, XLA credited with perfect fusion",
                "params_source": SOURCE}


def xla_roofline(xla: dict[str, Any], chip: dict[str, Any]) -> XlaRoofline:
    flops, nbytes = float(xla["flops"]), float(xla["bytes"])
    launches = max(int(xla.get("dots", 0)), 1)
    compute = flops / _dot_rate(xla.get("dtype", "float32"), chip)
    compute += float(xla.get("transcendentals", 0)) / chip["transcendentals_per_second"]
    seconds = max(compute, nbytes / chip["hbm_bytes_per_second"]) + launches * LAUNCH_S
    return XlaRoofline(seconds, flops, nbytes, launches, xla.get("dtype", "float32"))
