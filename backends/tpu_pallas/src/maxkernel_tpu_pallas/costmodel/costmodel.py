"""A static cost model of Pallas TPU kernels: an estimate, always labelled as one.

Inputs: the kernel descriptions from ``extract.py`` (grid, blocks, index-map
change counts, body work with each ``pl.when`` arm weighted by the share of
steps that run it) and the chip's figures (``pltpu.get_tpu_info_for_chip``)
with the model's fitted parameters (``params.py``). Per kernel:

* **HBM traffic**: an input block is copied in each time its block index
  changes between consecutive grid steps (Pallas skips the copy when it does
  not), plus the first step; an output block is written back each time its
  index changes, plus the last. Operands outside the pipeline (``pl.ANY``)
  move what the body's own DMAs copy, weighted like the rest of the body;
  with no DMA in the body, once at full size.
* **Run-time trip counts**: a grid axis sized at run time (megablox's active
  tiles) or a ``while`` loop in a body (a paged kernel's key blocks), not
  known before the kernel runs, is charged the trips that make the kernels'
  matmul work equal to the reference's, the least an honest program does; one
  trip count for all of them in a program (``resolve_dynamic_grids``).
* **VMEM**: each block times its buffer count, plus scratch, padded to the
  (sublanes, 128) tile of its dtype; compared with the scoped limit the
  compiler applies (``vmem_limit_bytes``, else the generation's default).
* **Compute**: the MXU (FLOPs padded as the MXU pads them, f32 in several
  bf16 passes), the VPU (element-ops) and the EUP (transcendentals) run at
  once (``units.compute_seconds``).
* **Pipeline**: copies overlap compute, so the body costs the larger of the
  two; the first step's copies in and the last step's copies out do not
  overlap anything; every grid step pays a fixed overhead.
* **Cores**: on a chip with two TensorCores per device (megacore) the grid's
  ``parallel`` axes are split across them.

Time is ``max(memory, compute) + fill + steps x overhead``, per core. What it
ignores, and how wrong it has been against measurements, is in
docs/profiling.md.
"""

from __future__ import annotations

import math
from typing import Any

from attrs import evolve
from maxkernel_pallas_judge.profiling.records import CostEstimate, KernelCost, OperandCost, matmul_flops_per_step

from .params import ModelParams, generation_constants, model_params
from .units import (LANES, SUBLANES_32BIT, compute_seconds, eup_rate, hbm_seconds, mxu_rate, padded_matmul_flops,
                    passes_for, vpu_rate)

__all__ = ["generation_constants", "estimate", "kernel_cost", "tile_padded_bytes", "with_glue"]


def tile_padded_bytes(shape: list[int], itemsize: int) -> int:
    """Bytes of a VMEM buffer whose last two dims are padded to the (sublanes, 128) tile of its dtype."""
    dims = list(shape) or [1]
    if len(dims) == 1:
        dims = [1, *dims]
    sublanes = SUBLANES_32BIT * max(4 // max(itemsize, 1), 1)  # 8 for f32, 16 for bf16, 32 for int8
    rows = math.ceil(dims[-2] / sublanes) * sublanes
    cols = math.ceil(dims[-1] / LANES) * LANES
    return math.prod(dims[:-2]) * rows * cols * itemsize


def _matmul_work(desc: dict[str, Any]) -> float:
    """A kernel's matmul FLOPs over its static grid steps and repeats (a run-time axis at one trip)."""
    return matmul_flops_per_step(desc) * int(desc["steps"]) * int(desc.get("repeat", 1))


def _loop_work(desc: dict[str, Any]) -> float:
    """The matmul FLOPs of one more trip of a kernel's innermost run-time loops, over its static grid."""
    loop = desc["body"].get("loop")
    return _matmul_work({**desc, "body": loop}) if loop else 0.0


def _with_loop_trips(body: dict[str, Any], extra: int) -> dict[str, Any]:
    """The body with ``extra`` more trips of its innermost run-time loops."""
    loop = body["loop"]
    out = {**body, "dots": body["dots"] + [{**d, "count": d["count"] * extra, "runs": d["runs"] * extra}
                                           for d in loop["dots"]]}
    for key in ("elementwise", "transcendental", "dma_bytes"):
        for field in (key, f"{key}_runs"):
            out[field] = body.get(field, 0) + extra * loop.get(field, 0)
    return out


def resolve_dynamic_grids(kernels: list[dict[str, Any]], reference_flops: float | None) -> list[dict[str, Any]]:
    """The descriptions with every run-time trip count given a number: one for all of them, the least at which
    the kernels' matmul work together reaches the reference's (at least 1), or 1 when that cannot be told (no
    dots, or no reference count), said in ``dynamic_note``. Run-time trip counts are a grid axis sized at run
    time (megablox's active tiles) and a ``while`` loop in a body (a paged kernel's key blocks; only innermost
    loops with matmuls in them, in kernels without a run-time axis, outer ones stay at one trip). One count
    shared, not the reference's whole work per kernel: a mixture of experts' three grouped matmuls each do a
    third of it."""
    grids = [i for i, k in enumerate(kernels) if k.get("dynamic_axes")]
    loops = [i for i, k in enumerate(kernels) if i not in grids and _loop_work(k)]
    if not grids and not loops:
        return kernels
    # at T trips: a grid kernel does T x its work, a loop kernel its work (one trip) plus T - 1 more trips
    fixed = sum(_matmul_work(k) - (_loop_work(k) if i in loops else 0.0)
                for i, k in enumerate(kernels) if i not in grids)
    per_trip = sum(_matmul_work(kernels[i]) for i in grids) + sum(_loop_work(kernels[i]) for i in loops)
    if per_trip and reference_flops:
        trips = max(1, math.ceil((reference_flops - fixed) / per_trip))
        note = f"run-time trip count charged {trips} trips: the kernels' matmul work reaching the reference's"
    else:
        trips, note = 1, "run-time trip count charged 1 trip (no matmul work to size it by): a lower bound"
    out = list(kernels)
    for i in grids:
        desc = kernels[i]
        axis = desc["dynamic_axes"][0]
        grid = [trips if a == axis else (1 if g is None else g) for a, g in enumerate(desc["grid"])]
        out[i] = {**desc, "grid": grid, "steps": int(desc["steps"]) * trips, "dynamic_axes": [],
                  "dynamic_note": note}
    for i in loops:
        desc = kernels[i]
        out[i] = {**desc, "body": _with_loop_trips(desc["body"], trips - 1), "dynamic_note": note}
    return out


def resolve_dynamic_grid(desc: dict[str, Any], reference_flops: float | None) -> dict[str, Any]:
    """One kernel's description with its run-time grid axis sized (``resolve_dynamic_grids`` of it alone)."""
    return resolve_dynamic_grids([desc], reference_flops)[0]


def _operand_traffic(op: dict[str, Any], desc: dict[str, Any], manual_dma: bool) -> tuple[int, int]:
    """(transfers, HBM bytes) of one operand."""
    array_bytes = math.prod(op["array_shape"]) * op["itemsize"]
    if not op.get("pipelined", True):
        return (0, 0) if manual_dma else (1, array_bytes)  # the body's DMAs are charged on their own
    if op.get("changes") is None:
        return 1, array_bytes  # data-dependent index map: once at full size
    transfers = (op["changes"] + 1) * int(desc.get("repeat", 1))
    return transfers, transfers * math.prod(op["block_shape"]) * op["itemsize"]


def _runs(body: dict[str, Any], key: str) -> float:
    """A body count weighted by the share of steps that run it (older descriptions: every arm, every step)."""
    return float(body.get(f"{key}_runs", body.get(key, 0)))


def _operands(desc: dict[str, Any], steps: int) -> tuple[list[OperandCost], int, int]:
    """(operand costs, VMEM bytes, bytes of the first step's copies in and the last step's copies out)."""
    operands, vmem, fill = [], 0, 0
    dma_bytes = int(round(_runs(desc["body"], "dma_bytes") * steps))
    for op in desc["operands"]:
        array_bytes = math.prod(op["array_shape"]) * op["itemsize"]
        transfers, hbm = _operand_traffic(op, desc, dma_bytes > 0)
        pipelined = op.get("pipelined", True)
        padded = tile_padded_bytes(op["block_shape"], op["itemsize"]) * (op["buffers"] if pipelined else 0)
        vmem += padded
        if pipelined and transfers:
            fill += math.prod(op["block_shape"]) * op["itemsize"]
        operands.append(OperandCost(op["role"], op["index"], op["block_shape"], op["dtype"], hbm, array_bytes,
                                    transfers, padded, op.get("depends_on")))
    vmem += sum(tile_padded_bytes(s["shape"], s["itemsize"]) for s in desc["scratch"])  # semaphores: 0 bytes
    if dma_bytes:  # the kernel's own copies (pl.ANY operands), one entry for all of them
        operands.append(OperandCost("dma", 0, [], "", dma_bytes, 0, steps, 0, None))
    return operands, vmem, fill


def _mxu(desc: dict[str, Any], steps: int, chip: dict[str, Any], params,
         ideal_f32_passes: float | None = None) -> dict[str, Any]:
    """MXU time and FLOPs of the body's dots over every step, each weighted by the share of steps that run it.

    The ideal counts an f32 dot at ``ideal_f32_passes`` (what the task's tolerance needs) when given, so a
    kernel that computes at a higher precision than needed is not "at roofline"; else at its own passes."""
    out = {"flops": 0.0, "padded": 0.0, "seconds": 0.0, "ideal": 0.0, "dots": []}
    for dot in desc["body"]["dots"]:
        times = steps * float(dot.get("runs", dot["count"])) * dot["batch"]
        real = 2.0 * dot["m"] * dot["n"] * dot["k"] * times
        padded = padded_matmul_flops(dot["m"], dot["n"], dot["k"], chip, params) * times
        passes = passes_for(dot["dtype"], dot.get("precision"), params)
        rate = mxu_rate(dot["dtype"], chip, params)
        out["flops"] += real
        out["padded"] += padded
        out["seconds"] += padded * passes / rate
        needed = ideal_f32_passes if ideal_f32_passes and dot["dtype"] == "float32" else passes
        out["ideal"] += real * needed / (rate / params.mxu_efficiency)
        out["dots"].append({**dot, "padding_waste": 1 - real / padded if padded else 0.0})
    return out


def _cores_used(desc: dict[str, Any], chip: dict[str, Any]) -> int:
    semantics = desc.get("dimension_semantics") or []
    cores = int(chip.get("cores_per_device", 1))
    parallel = math.prod(g for g, s in zip(desc["grid"], semantics, strict=False) if s == "parallel") if semantics else 1
    return min(cores, parallel) if cores > 1 else 1


def kernel_cost(desc: dict[str, Any], chip: dict[str, Any], params: ModelParams,
                ideal_f32_passes: float | None = None) -> KernelCost:
    steps = int(desc["steps"]) * int(desc.get("repeat", 1))
    operands, vmem, fill = _operands(desc, steps)
    mxu = _mxu(desc, steps, chip, params, ideal_f32_passes)
    body = desc["body"]
    vpu_s = _runs(body, "elementwise") * steps / vpu_rate(chip, params)
    eup_s = _runs(body, "transcendental") * steps / eup_rate(chip, params)
    cores_used = _cores_used(desc, chip)
    hbm = sum(o.hbm_bytes for o in operands)
    # Megacore: both cores share the chip's HBM bandwidth, so memory time does not shrink; compute does.
    memory_s = hbm_seconds(hbm, chip, params)
    compute_s = compute_seconds(mxu["seconds"], vpu_s, eup_s, params) / cores_used
    overhead_s = steps * params.step_overhead_s / cores_used
    fill_s = hbm_seconds(fill, chip, params) if steps > 1 else 0.0
    limit = int(desc.get("vmem_limit_bytes") or params.default_scoped_limit_bytes)
    cores = int(chip.get("cores_per_device", 1))
    return KernelCost(
        name=desc.get("name", "kernel"), grid=list(desc["grid"]), steps=steps, operands=operands, hbm_bytes=hbm,
        flops=mxu["flops"], mxu_flops_padded=mxu["padded"], elementwise=_runs(body, "elementwise") * steps,
        transcendental=_runs(body, "transcendental") * steps, vmem_bytes=vmem, vmem_limit_bytes=limit,
        cores_used=cores_used, memory_s=memory_s, compute_s=compute_s, overhead_s=overhead_s,
        seconds=max(memory_s, compute_s) + fill_s + overhead_s, ideal_compute_s=mxu["ideal"] / max(cores, 1),
        dots=mxu["dots"], mxu_s=mxu["seconds"] / cores_used, vpu_s=vpu_s / cores_used, eup_s=eup_s / cores_used,
        fill_s=fill_s,
    )


def estimate(kernels: list[dict[str, Any]], chip: dict[str, Any], target: str,
             reference_flops: float | None = None, params: ModelParams | None = None,
             ideal_f32_passes: float | None = None) -> CostEstimate:
    """The model on kernel descriptions; ``reference_flops`` (the reference's matmul FLOPs) sizes a grid axis
    that is data-dependent; ``params`` default to the ones in force for ``target`` on this machine;
    ``ideal_f32_passes`` is the precision the task needs, at which the roofline's ideal counts f32 matmuls."""
    params = params or model_params(target)
    costs = [kernel_cost(k, chip, params, ideal_f32_passes) for k in resolve_dynamic_grids(kernels, reference_flops)]
    flops = sum(k.flops for k in costs)
    hbm = sum(k.hbm_bytes for k in costs)
    # The roofline's floor: every array crosses HBM once, every FLOP at peak.
    min_bytes = sum(o.array_bytes for k in costs for o in k.operands)
    ideal = max(hbm_seconds(min_bytes, chip, params) * params.dma_efficiency, sum(k.ideal_compute_s for k in costs))
    return CostEstimate(target, costs, sum(k.seconds for k in costs), hbm, flops, ideal, chip,
                        params_source=params.source)


def with_glue(est: CostEstimate, program: dict[str, Any] | None, params: ModelParams | None = None) -> CostEstimate:
    """The estimate plus the code outside the kernels: the XLA model (``xla_model``) of the compiled candidate's
    ops other than its kernels (a transpose before an attention kernel, an im2col, a norm left to XLA), costed by
    the same unit rule as the kernels and as the reference. A candidate that is one kernel gets (about) nothing
    added; one that leaves work to XLA pays for it here, as it would on the chip."""
    if not program or "ops" not in program:
        return est
    from .xla_model import estimate_program

    glue = estimate_program(program, est.chip, params or model_params(est.target))
    return evolve(est, seconds=est.seconds - est.glue_seconds + glue.seconds, glue_seconds=glue.seconds,
                  glue_ops=glue.top(5))
