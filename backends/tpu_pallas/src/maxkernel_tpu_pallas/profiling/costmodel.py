"""A static cost model of Pallas TPU kernels: an estimate, always labelled as one.

Inputs: the kernel descriptions from ``extract.py`` (grid, blocks, index-map
change counts, body work) and the chip's figures (``pltpu.get_tpu_info_for_chip``
plus the per-generation constants in ``chips/*.toml``). Per kernel:

* **HBM traffic**: an input block is copied in each time its block index
  changes between consecutive grid steps (Pallas skips the copy when it does
  not), plus the first step; an output block is written back each time its
  index changes, plus the last. Operands outside the pipeline (``pl.ANY``)
  move what the body's own DMAs copy per step (every DMA charged, as if each
  ``pl.when`` around it ran); with no DMA in the body, once at full size.
* **Data-dependent grids**: an axis sized at run time (megablox's active
  tiles) is charged the trips that make the kernel's matmul work equal to the
  reference's, the least an honest kernel does (``resolve_dynamic_grid``).
* **VMEM**: each block times its buffer count, plus scratch, padded to the
  (sublanes, 128) tile of its dtype; compared with the scoped limit the
  compiler applies (``vmem_limit_bytes``, else the generation's default).
* **Compute**: MXU FLOPs of the body's dots per step, padded to the MXU
  (K and N to its width, M to the sublanes), f32 taking several bf16 passes;
  elementwise and transcendental element-ops on the VPU/EUP; a fixed overhead
  per grid step.
* **Cores**: on a chip with two TensorCores per device (megacore) the grid's
  ``parallel`` axes are split across them.

Time is ``max(memory, compute) + steps x overhead``, per core. What it ignores
is listed in docs/profiling.md.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

from attrs import define, evolve, field

CHIPS_DIR = Path(__file__).parent / "chips"
SUBLANES_32BIT = 8
LANES = 128


def generation_constants(target: str) -> dict[str, Any]:
    """The figures of ``chips/<target>.toml`` (the ones the chip table does not hold)."""
    return tomllib.loads((CHIPS_DIR / f"{target}.toml").read_text())


def tile_padded_bytes(shape: list[int], itemsize: int) -> int:
    """Bytes of a VMEM buffer whose last two dims are padded to the (sublanes, 128) tile of its dtype."""
    dims = list(shape) or [1]
    if len(dims) == 1:
        dims = [1, *dims]
    sublanes = SUBLANES_32BIT * max(4 // max(itemsize, 1), 1)  # 8 for f32, 16 for bf16, 32 for int8
    rows = math.ceil(dims[-2] / sublanes) * sublanes
    cols = math.ceil(dims[-1] / LANES) * LANES
    return math.prod(dims[:-2]) * rows * cols * itemsize


def _pad(value: int, multiple: int) -> int:
    return math.ceil(value / multiple) * multiple


@define
class OperandCost:
    role: str
    index: int
    block_shape: list[int]
    dtype: str
    hbm_bytes: int
    array_bytes: int
    transfers: int
    vmem_bytes: int
    depends_on: list[bool] | None

    @property
    def refetch(self) -> float:
        """Bytes moved over bytes of the array: 1.0 means each element crosses HBM once."""
        return self.hbm_bytes / self.array_bytes if self.array_bytes else 0.0


@define
class KernelCost:
    name: str
    grid: list[int]
    steps: int
    operands: list[OperandCost]
    hbm_bytes: int
    flops: float
    mxu_flops_padded: float
    elementwise: float
    transcendental: float
    vmem_bytes: int
    vmem_limit_bytes: int
    cores_used: int
    memory_s: float
    compute_s: float
    overhead_s: float
    seconds: float
    ideal_compute_s: float = 0.0  # unpadded FLOPs at the MXU's rate for their dtype
    dots: list[dict[str, Any]] = field(factory=list)

    @property
    def bound(self) -> str:
        parts = {"memory": self.memory_s, "compute": self.compute_s, "step overhead": self.overhead_s}
        return max(parts, key=parts.get)


@define
class CostEstimate:
    """The model's view of a whole candidate (several kernels add up)."""

    target: str
    kernels: list[KernelCost]
    seconds: float
    hbm_bytes: int
    flops: float
    ideal_seconds: float
    chip: dict[str, Any]
    estimated: bool = True
    #: Time of the code around the kernels (transposes, im2col, norms left to XLA), included in ``seconds``.
    glue_seconds: float = 0.0

    @property
    def bound(self) -> str:
        return max(self.kernels, key=lambda k: k.seconds).bound if self.kernels else "none"

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.hbm_bytes if self.hbm_bytes else float("inf")

    @property
    def roofline_fraction(self) -> float:
        return min(self.ideal_seconds / self.seconds, 1.0) if self.seconds else 0.0

    @property
    def fits_vmem(self) -> bool:
        return all(k.vmem_bytes <= k.vmem_limit_bytes for k in self.kernels)

    def dominant_operand(self) -> tuple[KernelCost, OperandCost] | None:
        pairs = [(k, o) for k in self.kernels for o in k.operands]
        return max(pairs, key=lambda p: p[1].hbm_bytes) if pairs else None


def _matmul_rate(dtype: str, chip: dict[str, Any], consts: dict[str, Any]) -> tuple[float, float]:
    """(ops per second of the MXU for this operand dtype, passes per op)."""
    if "int8" in dtype and chip.get("int8_ops_per_second"):
        return chip["int8_ops_per_second"], 1.0
    if "float8" in dtype and chip.get("fp8_ops_per_second"):
        return chip["fp8_ops_per_second"], 1.0
    passes = float(consts["mxu"]["f32_passes"]) if dtype == "float32" else 1.0
    return chip["bf16_ops_per_second"], passes


def matmul_flops_per_step(desc: dict[str, Any]) -> float:
    """The matmul FLOPs of one grid step of a described kernel (its body's dots, inner loops counted)."""
    return sum(2.0 * d["m"] * d["n"] * d["k"] * d["batch"] * d["count"] for d in desc["body"]["dots"])


def resolve_dynamic_grid(desc: dict[str, Any], reference_flops: float | None) -> dict[str, Any]:
    """The description with any run-time-sized grid axis given an extent: the trips at which the body's
    matmul work adds up to the reference's (at least 1), or 1 when that cannot be told (no dots, or no
    reference count), said in ``dynamic_note``."""
    dynamic = desc.get("dynamic_axes") or []
    if not dynamic:
        return desc
    per_step = matmul_flops_per_step(desc)
    static = int(desc["steps"]) * int(desc.get("repeat", 1))
    if per_step and reference_flops:
        trips = max(1, math.ceil(reference_flops / (per_step * static)))
        note = f"data-dependent grid axis charged {trips} trips: the body's matmul work reaching the reference's"
    else:
        trips, note = 1, "data-dependent grid axis charged 1 trip (no matmul work to size it by): a lower bound"
    grid = [trips if i == dynamic[0] else (1 if g is None else g) for i, g in enumerate(desc["grid"])]
    return {**desc, "grid": grid, "steps": int(desc["steps"]) * trips, "dynamic_axes": [], "dynamic_note": note}


def _operand_traffic(op: dict[str, Any], desc: dict[str, Any], manual_dma: bool) -> tuple[int, int]:
    """(transfers, HBM bytes) of one operand."""
    array_bytes = math.prod(op["array_shape"]) * op["itemsize"]
    if not op.get("pipelined", True):
        return (0, 0) if manual_dma else (1, array_bytes)  # the body's DMAs are charged on their own
    if op.get("changes") is None:
        return 1, array_bytes  # data-dependent index map: once at full size
    transfers = (op["changes"] + 1) * int(desc.get("repeat", 1))
    return transfers, transfers * math.prod(op["block_shape"]) * op["itemsize"]


def kernel_cost(desc: dict[str, Any], chip: dict[str, Any], consts: dict[str, Any]) -> KernelCost:
    steps = int(desc["steps"]) * int(desc.get("repeat", 1))
    operands, vmem = [], 0
    dma_bytes = int(desc["body"].get("dma_bytes", 0)) * steps
    for op in desc["operands"]:
        array_bytes = math.prod(op["array_shape"]) * op["itemsize"]
        transfers, hbm = _operand_traffic(op, desc, dma_bytes > 0)
        padded = tile_padded_bytes(op["block_shape"], op["itemsize"]) * (op["buffers"] if op.get("pipelined", True) else 0)
        vmem += padded
        operands.append(OperandCost(op["role"], op["index"], op["block_shape"], op["dtype"], hbm, array_bytes,
                                    transfers, padded, op.get("depends_on")))
    vmem += sum(tile_padded_bytes(s["shape"], s["itemsize"]) for s in desc["scratch"])  # semaphores: 0 bytes
    if dma_bytes:  # the kernel's own copies (pl.ANY operands), one entry for all of them
        operands.append(OperandCost("dma", 0, [], "", dma_bytes, 0, steps, 0, None))

    clock = chip["bf16_ops_per_second"] / (chip["num_mxus"] * chip["mxu_column_size"] ** 2 * 2)
    mxu = chip["mxu_column_size"]
    flops = padded_flops = mxu_seconds = ideal_compute = 0.0
    dots = []
    for dot in desc["body"]["dots"]:
        times = steps * dot["count"] * dot["batch"]
        real = 2.0 * dot["m"] * dot["n"] * dot["k"] * times
        padded = 2.0 * _pad(dot["m"], SUBLANES_32BIT) * _pad(dot["n"], mxu) * _pad(dot["k"], mxu) * times
        rate, passes = _matmul_rate(dot["dtype"], chip, consts)
        flops += real
        padded_flops += padded
        mxu_seconds += padded * passes / rate
        ideal_compute += real * passes / rate
        dots.append({**dot, "padding_waste": 1 - real / padded if padded else 0.0})
    body = desc["body"]
    vpu_seconds = body["elementwise"] * steps / (consts["vpu"]["elementwise_per_cycle"] * clock)
    eup_seconds = body["transcendental"] * steps / (consts["vpu"]["transcendental_per_cycle"] * clock)

    semantics = desc.get("dimension_semantics") or []
    cores = int(chip.get("cores_per_device", 1))
    parallel_extent = math.prod(g for g, s in zip(desc["grid"], semantics, strict=False) if s == "parallel") if semantics else 1
    cores_used = min(cores, parallel_extent) if cores > 1 else 1

    hbm = sum(o.hbm_bytes for o in operands)
    # Megacore: both cores share the chip's HBM bandwidth, so memory time does not shrink; compute does.
    memory_s = hbm / chip["mem_bw_bytes_per_second"]
    compute_s = (mxu_seconds + vpu_seconds + eup_seconds) / cores_used
    overhead_s = steps * float(consts["pipeline"]["step_overhead_s"]) / cores_used
    limit = int(desc.get("vmem_limit_bytes") or consts["vmem"]["default_scoped_limit_bytes"])
    return KernelCost(
        name=desc.get("name", "kernel"), grid=list(desc["grid"]), steps=steps, operands=operands, hbm_bytes=hbm,
        flops=flops, mxu_flops_padded=padded_flops, elementwise=body["elementwise"] * steps,
        transcendental=body["transcendental"] * steps, vmem_bytes=vmem, vmem_limit_bytes=limit,
        cores_used=cores_used, memory_s=memory_s, compute_s=compute_s, overhead_s=overhead_s,
        seconds=max(memory_s, compute_s) + overhead_s, ideal_compute_s=ideal_compute / max(cores, 1), dots=dots,
    )


def estimate(kernels: list[dict[str, Any]], chip: dict[str, Any], target: str,
             reference_flops: float | None = None) -> CostEstimate:
    """The model on kernel descriptions; ``reference_flops`` (the reference's matmul FLOPs) sizes a grid axis
    that is data-dependent."""
    consts = generation_constants(target)
    costs = [kernel_cost(resolve_dynamic_grid(k, reference_flops), chip, consts) for k in kernels]
    flops = sum(k.flops for k in costs)
    hbm = sum(k.hbm_bytes for k in costs)
    # The roofline's floor: every array crosses HBM once, every FLOP at peak.
    min_bytes = sum(o.array_bytes for k in costs for o in k.operands)
    ideal = max(min_bytes / chip["mem_bw_bytes_per_second"], sum(k.ideal_compute_s for k in costs))
    return CostEstimate(target, costs, sum(k.seconds for k in costs), hbm, flops, ideal, chip)


def with_glue(est: CostEstimate, candidate_cost: dict[str, float] | None) -> CostEstimate:
    """The estimate plus the code outside the kernels, from XLA's own estimate of the compiled candidate.

    XLA's cost analysis sees the whole candidate program: the glue fusions, and the kernels only as custom
    calls whose operands and results cross HBM. What it estimates beyond that ideal kernel I/O is the glue's
    time, added to the model's kernel time. A candidate that is one kernel gets (about) nothing added; one
    that leaves transposes or an im2col to XLA pays for them here, as it would on the chip.
    """
    xla = xla_reference_seconds(candidate_cost or {}, est.chip)
    if not xla:
        return est
    kernel_io = sum(o.array_bytes for k in est.kernels for o in k.operands) / est.chip["mem_bw_bytes_per_second"]
    glue = max(0.0, xla - kernel_io)
    return evolve(est, seconds=est.seconds - est.glue_seconds + glue, glue_seconds=glue)


def xla_reference_seconds(cost: dict[str, float], chip: dict[str, Any]) -> float | None:
    """XLA's own estimate of the reference: its ``optimal_seconds`` when given, else the roofline of
    its flops and bytes accessed from ``cost_analysis()``."""
    if cost.get("optimal_seconds", 0) > 0:
        return float(cost["optimal_seconds"])
    flops = cost.get("flops", 0.0)
    accessed = cost.get("bytes accessed", 0.0)
    if not flops and not accessed:
        return None
    return max(accessed / chip["mem_bw_bytes_per_second"], flops / chip["bf16_ops_per_second"])
