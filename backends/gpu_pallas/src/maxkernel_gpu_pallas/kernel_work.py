"""A GPU kernel's facts from the exported program's custom call (the checker's count, never the candidate's).

Pallas lowers a ``pallas_call`` for CUDA in one of two ways:

* **Triton** (``__gpu$xla.gpu.triton``): the call carries its Triton IR and its
  launch grid. The IR is read here: every ``tt.dot`` counts ``2·M·N·K`` per
  trip of the ``scf.for`` loops around it (trip counts from constant bounds;
  a loop whose bounds are not constants is charged ``UNBOUNDED_TRIPS``, the
  judge's worst case), times the programs in the grid.
* **Mosaic GPU** (``mosaic_gpu_v2``): the kernel is LLVM/NVVM IR whose
  matrix work is warpgroup instructions; it is recognised as a kernel but its
  FLOPs are not counted (``counted: False``), so the CPU-twin check compares
  its operand and result types and the glue, not its inner FLOPs.
"""

from __future__ import annotations

import math
from typing import Any

from jax._src.lib.mlir import ir
from maxkernel_pallas_judge.judge.hlo_values import UNBOUNDED_TRIPS

TRITON = "__gpu$xla.gpu.triton"
MOSAIC_GPU = ("mosaic_gpu_v2", "mosaic_gpu")


def _downcast(attr):
    return attr.maybe_downcast() if hasattr(attr, "maybe_downcast") else attr


def _config(op) -> dict[str, Any]:
    if "mhlo.backend_config" not in op.attributes:
        return {}
    attr = _downcast(op.attributes["mhlo.backend_config"])
    if not isinstance(attr, ir.DictAttr):
        return {}
    return {key: _downcast(attr[key]) for key in ("ir", "name", "grid_x", "grid_y", "grid_z") if key in attr}


def _int(attr, default: int = 1) -> int:
    return attr.value if isinstance(attr, ir.IntegerAttr) else default


_FOLD = {"arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b, "arith.muli": lambda a, b: a * b,
         "arith.divsi": lambda a, b: a // b if b else None, "arith.divui": lambda a, b: a // b if b else None}


def _constant(value, depth: int = 0) -> int | None:
    """The value's integer when it folds from constants (the loop bounds Pallas emits: ``lower + trips``)."""
    owner = value.owner
    if isinstance(owner, ir.Block) or depth > 8:
        return None
    if owner.name == "arith.constant":
        attr = _downcast(owner.attributes["value"])
        return attr.value if isinstance(attr, ir.IntegerAttr) else None
    if owner.name in _FOLD:
        a, b = (_constant(v, depth + 1) for v in list(owner.operands)[:2])
        return None if a is None or b is None else _FOLD[owner.name](a, b)
    return None


def _trips(loop) -> int:
    lower, upper, step = (_constant(v) for v in list(loop.operands)[:3])
    if None in (lower, upper, step) or step <= 0:
        return UNBOUNDED_TRIPS
    return max(math.ceil((upper - lower) / step), 0)


def _dot_flops(op) -> int:
    a, b = (ir.RankedTensorType(v.type).shape for v in list(op.operands)[:2])
    batch = math.prod(a[:-2]) if len(a) > 2 else 1
    return 2 * batch * a[-2] * a[-1] * b[-1]


def _walk(operation, times: int) -> int:
    flops = 0
    for region in operation.regions:
        for block in region.blocks:
            for child in block.operations:
                name = child.operation.name
                if name == "tt.dot":
                    flops += times * _dot_flops(child.operation)
                inner = times * _trips(child.operation) if name == "scf.for" else times
                flops += _walk(child.operation, inner)
    return flops


def triton_work(op) -> dict[str, Any]:
    config = _config(op)
    grid = [_int(config.get(f"grid_{axis}")) for axis in "xyz"]
    while len(grid) > 1 and grid[-1] == 1:  # CUDA's grid is 3-D; a Pallas grid of fewer axes pads it with 1s
        grid.pop()
    name = config["name"].value if isinstance(config.get("name"), ir.StringAttr) else "triton_kernel"
    flops = 0
    if "ir" in config:
        module = ir.Module.parse(config["ir"].value_bytes)
        flops = _walk(module.operation, 1)
    return {"name": name, "matmul_flops": flops, "steps": math.prod(grid), "grid": grid, "counted": True,
            "lowering": "triton"}


def kernel_work(call_target: str, op) -> dict[str, Any] | None:
    """The kernel facts of a GPU Pallas custom call; None for any other custom call."""
    if call_target == TRITON:
        return triton_work(op)
    if call_target in MOSAIC_GPU:
        return {"name": "mosaic_gpu_kernel", "matmul_flops": 0, "steps": 1, "counted": False, "lowering": "mosaic_gpu"}
    return None
