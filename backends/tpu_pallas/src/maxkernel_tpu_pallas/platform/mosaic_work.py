"""The work inside one Mosaic kernel of a TPU program, read from the kernel's own serialized module.

A ``tpu_custom_call`` carries its kernel as MLIR bytecode in the call's
backend config. Parsed here (unknown dialects allowed: the serialized form
is Mosaic's versioned ``stable_mosaic`` one), it gives the grid
(``iteration_bounds``), the block shapes (``window_params``) and every
``tpu.matmul``/``vector.contract`` of the body, with ``scf.if`` charged at its
dearer arm and ``scf.for`` by its static trip count.
"""

from __future__ import annotations

import base64
import json
import math
import re
from typing import Any

from jax._src.lib.mlir import ir

from maxkernel_pallas_judge.judge.hlo_values import UNBOUNDED_TRIPS, constant_int

#: Mosaic writes a dynamic extent (a grid axis sized by scalar prefetch) as this.
DYNAMIC = -(1 << 63)
#: A kernel loop or grid axis whose extent is not static is charged as this many trips (as every unbounded
#: count is: the CPU interpret program's grid loop must weigh the same).
UNKNOWN_TRIPS = UNBOUNDED_TRIPS
MATMULS = ("tpu.matmul", "vector.contract")


def _short(name: str) -> str:
    return name[len("stable_mosaic."):] if name.startswith("stable_mosaic.") else name


def _shape(t: ir.Type) -> list[int]:
    try:
        return list(ir.ShapedType(t).shape)
    except (ValueError, TypeError):
        return []


def _contracting(op: ir.Operation) -> list[int]:
    text = str(op.attributes["dimension_numbers"]) if "dimension_numbers" in op.attributes else ""
    found = re.search(r"<\[([\d,\s]*)\]", text)
    if found:
        return [int(d) for d in found[1].split(",") if d.strip()]
    return [len(_shape(op.operands[0].type)) - 1]


def _matmul_flops(op: ir.Operation) -> int:
    lhs = _shape(op.operands[0].type)
    out = _shape(op.results[0].type)
    k = math.prod(lhs[d] for d in _contracting(op) if d < len(lhs)) if lhs else 1
    return 2 * math.prod(out) * k


def _for_trips(op: ir.Operation) -> int:
    lower, upper, step = (constant_int(v) for v in op.operands[:3])
    if None in (lower, upper, step) or step == 0:
        return UNKNOWN_TRIPS
    return max(math.ceil((upper - lower) / step), 0)


def _region_flops(region: ir.Region) -> int:
    total = 0
    for block in region.blocks:
        for op in block.operations:
            total += _op_flops(op.operation)
    return total


def _op_flops(op: ir.Operation) -> int:
    name = _short(op.name)
    if name in MATMULS:
        return _matmul_flops(op)
    if name == "scf.if":
        return max((_region_flops(r) for r in op.regions), default=0)
    if name == "scf.for":
        return _for_trips(op) * sum(_region_flops(r) for r in op.regions)
    return sum(_region_flops(r) for r in op.regions)


def _ints(attr: ir.Attribute) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", str(attr).split(":", 1)[-1])]


def _kernel_function(module: ir.Module) -> ir.Operation:
    funcs = [op.operation for op in module.body.operations if _short(op.operation.name) == "func.func"]
    for func in funcs:
        if "iteration_bounds" in func.attributes or "dimension_semantics" in func.attributes:
            return func
    named = [f for f in funcs if ir.StringAttr(f.attributes["sym_name"]).value == "main"]
    if not (named or funcs):
        raise ValueError("the Mosaic module has no function")
    return (named or funcs)[0]


def kernel_body(call: ir.Operation) -> tuple[str, bytes]:
    """(kernel name, serialized Mosaic module) of a ``tpu_custom_call``."""
    config = json.loads(ir.StringAttr(call.attributes["backend_config"]).value)
    custom = config.get("custom_call_config", config)
    name = str(custom.get("kernel_name") or config.get("kernel_name") or "mosaic kernel")
    return name, base64.b64decode(custom["body"])


def kernel_work(call: ir.Operation) -> dict[str, Any]:
    """Grid, block shapes and per-step matmul FLOPs of the Mosaic kernel a custom call runs."""
    name, body = kernel_body(call)
    from jax._src import tpu_custom_call
    from jax._src.interpreters import mlir

    context = mlir.make_ir_context()
    context.allow_unregistered_dialects = True  # the body is Mosaic's versioned "stable_mosaic" form
    tpu_custom_call.tpu.register_dialect(context)  # its types (memory spaces) must parse
    with context:
        module = ir.Module.parse(body)
        func = _kernel_function(module)
        grid = _ints(func.attributes["iteration_bounds"]) if "iteration_bounds" in func.attributes else []
        dynamic = any(g == DYNAMIC or g < 0 for g in grid)
        steps = math.prod(UNKNOWN_TRIPS if (g == DYNAMIC or g < 0) else g for g in grid) if grid else 1
        blocks = []
        if "window_params" in func.attributes:
            blocks = [[int(x) for x in b.split(",") if x.strip()] for b in
                      re.findall(r"window_bounds\s*=\s*array<i64:\s*([\d,\s]*)>", str(func.attributes["window_params"]))]
        flops = sum(_region_flops(r) for r in func.regions)
    return {"name": name, "grid": grid, "steps": steps, "dynamic_grid": dynamic, "blocks": blocks,
            "matmul_flops": flops}
