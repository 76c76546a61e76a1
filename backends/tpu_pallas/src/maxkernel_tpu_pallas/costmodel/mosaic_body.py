"""The work of a Mosaic kernel inside a compiled program, for the speed model (runs in a worker: imports jax).

XLA itself writes Mosaic kernels (its online-softmax for a softmax feeding a
matmul) and a candidate's Pallas kernels reach the compiled program the same
way: a ``tpu_custom_call`` whose backend config holds the kernel's MLIR. Read
here: the grid (``iteration_bounds``), the work of one step (matmul shapes,
vector element-ops, transcendentals; ``scf.for`` by its trip count, ``scf.if``
at its dearer arm) and each window's traffic, from the grid axes its
``transform_indices`` function reads: a block is fetched again each time an
axis it follows (or any axis outside that one) moves on.
"""

from __future__ import annotations

import base64
import json
import math
import re
from typing import Any

from jax._src.lib.mlir import ir

from ..platform.mosaic_work import _for_trips, _kernel_function, _shape, _short

MATMULS = ("tpu.matmul", "vector.contract")
#: Vector ops that only move or reinterpret data: no VPU arithmetic charged.
MOVES = ("vector.load", "vector.store", "vector.broadcast", "vector.shape_cast", "vector.extract", "vector.insert",
         "tpu.load", "tpu.store", "tpu.memref_slice", "tpu.repeat", "vector.transpose", "tpu.relayout")


def _elements(value: ir.Value) -> int:
    shape = _shape(value.type)
    return math.prod(shape) if shape else 1


def _matmul(op: ir.Operation) -> dict[str, Any]:
    lhs, rhs = _shape(op.operands[0].type), _shape(op.operands[1].type)
    text = str(op.attributes["dimension_numbers"]) if "dimension_numbers" in op.attributes else ""
    found = re.search(r"<\[([\d,\s]*)\],\s*\[([\d,\s]*)\]", text)
    lc = [int(d) for d in found[1].split(",") if d.strip()] if found else [len(lhs) - 1]
    rc = [int(d) for d in found[2].split(",") if d.strip()] if found else [0]
    k = math.prod(lhs[d] for d in lc if d < len(lhs)) or 1
    m = math.prod(lhs) // k if lhs else 1
    n = math.prod(rhs) // (math.prod(rhs[d] for d in rc if d < len(rhs)) or 1) if rhs else 1
    dtype = str(ir.ShapedType(op.operands[0].type).element_type)
    precision = str(op.attributes["precision"]) if "precision" in op.attributes else ""
    return {"m": m, "n": n, "k": k, "batch": 1, "dtype": {"f32": "float32", "bf16": "bfloat16"}.get(dtype, dtype),
            "count": 1, "runs": 1.0, **({"precision": precision} if precision else {})}


def _empty() -> dict[str, Any]:
    return {"dots": [], "elementwise": 0.0, "transcendental": 0.0}


def _scaled(work: dict[str, Any], times: float) -> dict[str, Any]:
    return {"dots": [{**d, "count": d["count"] * times, "runs": d["runs"] * times} for d in work["dots"]],
            "elementwise": work["elementwise"] * times, "transcendental": work["transcendental"] * times}


def _add(into: dict[str, Any], work: dict[str, Any]) -> None:
    into["dots"] += work["dots"]
    into["elementwise"] += work["elementwise"]
    into["transcendental"] += work["transcendental"]


def _region_work(region: ir.Region) -> dict[str, Any]:
    work = _empty()
    for block in region.blocks:
        for op in block.operations:
            _add(work, _op_work(op.operation))
    return work


def _op_work(op: ir.Operation) -> dict[str, Any]:
    name = _short(op.name)
    if name in MATMULS:
        return {"dots": [_matmul(op)], "elementwise": 0.0, "transcendental": 0.0}
    if name == "scf.if":
        arms = [_region_work(r) for r in op.regions]
        return max(arms, key=lambda w: (sum(2.0 * d["m"] * d["n"] * d["k"] for d in w["dots"]), w["elementwise"]),
                   default=_empty())
    if name == "scf.for":
        inner = _empty()
        for r in op.regions:
            _add(inner, _region_work(r))
        return _scaled(inner, _for_trips(op))
    work = _empty()
    for r in op.regions:
        _add(work, _region_work(r))
    results = list(op.results)
    if results and _shape(results[0].type) and name not in MOVES:
        if name.startswith("math."):
            work["transcendental"] += _elements(results[0])
        elif name == "vector.multi_reduction":
            work["elementwise"] += _elements(op.operands[0])
        elif name.startswith(("arith.", "tpu.")):
            work["elementwise"] += _elements(results[0])
    return work


def _depends(func: ir.Operation, n_grid: int) -> set[int]:
    """Grid axes (argument indices below ``n_grid``) that a transform_indices function's results read."""
    block = func.regions[0].blocks[0]
    deps: dict[str, set[int]] = {}
    for i, arg in enumerate(block.arguments):
        deps[arg.get_name()] = {i} if i < n_grid else set()
    result: set[int] = set()
    for op in block.operations:
        op = op.operation
        used = set().union(*(deps.get(v.get_name(), set()) for v in op.operands)) if len(op.operands) else set()
        for res in op.results:
            deps[res.get_name()] = used
        if _short(op.name) in ("func.return", "return"):
            result |= used
    return result


def _affine_depends(text: str) -> set[int]:
    """Grid axes an ``affine_map<(d0, d1, ...) -> (...)>`` reads in its results."""
    results = text.split("->", 1)[-1]
    return {int(d) for d in re.findall(r"\bd(\d+)\b", results)}


def _windows(module: ir.Module, func: ir.Operation, grid: list[int]) -> list[dict[str, Any]]:
    """Per operand: the bytes of its block and how many times it is copied (None bytes: left in HBM, once)."""
    funcs = {ir.StringAttr(op.operation.attributes["sym_name"]).value: op.operation
             for op in module.body.operations if _short(op.operation.name) == "func.func"}
    text = str(func.attributes["window_params"]) if "window_params" in func.attributes else ""
    memrefs = [a for a in func.regions[0].blocks[0].arguments
               if "memref" in str(a.type) and "smem" not in str(a.type) and "semaphore" not in str(a.type)]
    windows = []
    for i, entry in enumerate(re.findall(r"\{([^{}]*)\}", text)):
        if i >= len(memrefs) or "any" in str(memrefs[i].type).lower():
            windows.append({"bytes": None, "transfers": 1})  # left in HBM: the operand's own bytes, once
            continue
        memref = ir.MemRefType(memrefs[i].type)
        bounds = re.search(r"window_bounds\s*=\s*array<i64:\s*([\d,\s]*)>", entry)
        block = [int(x) for x in bounds[1].split(",") if x.strip()] if bounds else list(memref.shape)
        width = getattr(memref.element_type, "width", 32)
        symbol = re.search(r"transform_indices\s*=\s*@([\w.\-]+)", entry)
        affine = re.search(r"transform_indices\s*=\s*(affine_map<\([^)]*\)\s*->\s*\([^)]*\)>)", entry)
        if symbol and symbol[1] in funcs:
            axes = _depends(funcs[symbol[1]], len(grid))
        elif affine:
            axes = _affine_depends(affine[1])
        else:
            axes = set(range(len(grid)))
        transfers = math.prod(grid[: max(axes) + 1]) if axes else 1
        windows.append({"bytes": math.prod(block) * max(width // 8, 1), "transfers": transfers})
    return windows


def describe_mosaic(backend_config: str, dynamic_extent: int = 1) -> dict[str, Any]:
    """Grid, per-step work and window traffic of the Mosaic kernel in a tpu_custom_call's backend config; a
    grid axis sized at run time (listed in ``dynamic_axes``) is given ``dynamic_extent``."""
    from jax._src import tpu_custom_call
    from jax._src.interpreters import mlir

    config = json.loads(backend_config)
    custom = config.get("custom_call_config", config)
    context = mlir.make_ir_context()
    context.allow_unregistered_dialects = True
    tpu_custom_call.tpu.register_dialect(context)
    with context:
        module = ir.Module.parse(base64.b64decode(custom["body"]))
        func = _kernel_function(module)
        grid = [int(x) for x in re.findall(r"-?\d+", str(func.attributes["iteration_bounds"]).split(":", 1)[-1])] \
            if "iteration_bounds" in func.attributes else []
        dynamic = [i for i, g in enumerate(grid) if g <= 0]
        grid = [g if g > 0 else dynamic_extent for g in grid]
        work = _region_work(func.regions[0])
        windows = _windows(module, func, grid)
    return {"grid": grid, "steps": math.prod(grid) if grid else 1, "body": work, "windows": windows,
            "dynamic_axes": dynamic}
