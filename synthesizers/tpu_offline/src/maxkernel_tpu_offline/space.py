"""Each template's parameter space: legal points, a default chosen by the cost model, neighbours for search.

Points are dicts of the module's constants. Every value is a power of two
times the tile alignment, and the generated module re-derives legal block
sizes from the actual shapes (``_block``), so no point can yield an illegal
block; the cost model (``maxkernel_tpu_pallas.costmodel``) ranks the points
at full size and flags the ones that overflow VMEM.
"""

from __future__ import annotations

from typing import Any

from maxkernel_synthesis.analysis import Analysis
from .blocks import legal_block, pipelined_operand, sublane_align
from .group_reduce import epilogue_ops as group_epilogue_ops
from .liveness import temporaries_per_element
from .templates import accumulates_in_output, n_align

POWERS = [2 ** i for i in range(3, 14)]  # 8 .. 8192


def space(a: Analysis, dtype: str) -> dict[str, list[int]]:
    align = sublane_align(dtype)
    if a.template == "rowwise":
        return {"BLOCK_ROWS": [p for p in POWERS if align <= p <= max(a.rows, align)]}
    if a.template == "batch":
        return {"BLOCK_B": [p for p in [1, 2, 4, *POWERS] if p <= a.rows]}
    if a.template == "staged":
        from .staged.describe import space as staged_space

        return staged_space(a.staged, POWERS)
    if a.template == "attention":
        from .flash import K_ALIGN, q_align

        qa, spec = q_align(a.attention), a.attention
        return {"BLOCK_Q": [p for p in POWERS if qa <= p <= max(spec.sq, qa) and p <= 2048],
                "BLOCK_K": [p for p in POWERS if K_ALIGN <= p <= max(spec.sk, K_ALIGN) and p <= 4096]}
    (m, k), n = a.program.shapes[a.dot.inputs[0]], a.d
    return {
        "BLOCK_M": [p for p in POWERS if align <= p <= max(m, align) and p <= 2048],
        "BLOCK_N": [n] if a.full_rows else [p for p in POWERS if n_align(a) <= p <= max(n, 128) and p <= 4096],
        "BLOCK_K": [p for p in POWERS if 128 <= p <= max(k, 128) and p <= 4096],
    }


def _fixed(a: Analysis, vmem_limit: int) -> dict[str, int]:
    if a.template in ("rowwise", "batch", "attention", "staged"):
        return {"VMEM_LIMIT_BYTES": vmem_limit}
    return {"FULL_ROWS": int(a.full_rows), "VMEM_LIMIT_BYTES": vmem_limit}


def describe(a: Analysis, point: dict[str, int], dtype: str) -> dict[str, Any] | list[dict[str, Any]]:
    """The kernel description(s) the cost model reads, built analytically for this template's index maps."""
    shapes = a.program.shapes
    align = sublane_align(dtype)
    if a.template == "rowwise":
        br = legal_block(a.rows, point["BLOCK_ROWS"], align)
        steps = a.rows // br
        operands = []
        for name in [*a.program.inputs, a.output]:
            kind = a.kinds.get(name, "scalar")
            block = {"row": [br, a.d], "col": [1, a.d], "rowred": [br, 1], "scalar": [1, 1]}[kind]
            moving = kind in ("row", "rowred")
            operands.append(pipelined_operand("output" if name == a.output else "input",
                                              [a.rows if moving else 1, block[1]], block, dtype,
                                              steps - 1 if moving else 0, [moving]))
        ops = len(a.program.eqns) + len(a.group_reductions) * group_epilogue_ops(a.group or 1)
        # Rows still needed after a reduction are held in VMEM: 12p's RMSNorm at 1024 rows of 8192 took 96.54 MiB
        # of scoped VMEM on v6e (64.5 MiB of blocks + this count's 32 MiB), past its 96 MiB limit.
        scratch = _temporaries(a, br, a.d)
        return {"name": "rowwise", "grid": [steps], "steps": steps, "dimension_semantics": ["parallel"],
                "vmem_limit_bytes": point.get("VMEM_LIMIT_BYTES"), "operands": operands, "scratch": scratch,
                "body": {"dots": [], "elementwise": ops * br * a.d, "transcendental": 0}, "repeat": 1}
    if a.template == "batch":
        return _describe_batch(a, point)
    if a.template == "staged":
        from .staged.describe import describe as describe_staged

        return describe_staged(a.staged, point)
    if a.template == "attention":
        from .flash import describe as describe_attention

        return describe_attention(a.attention, point)
    (m, k), n = shapes[a.dot.inputs[0]], a.d
    bm = legal_block(m, point["BLOCK_M"], align)
    bn = n if a.full_rows else legal_block(n, point["BLOCK_N"], n_align(a))
    bk = legal_block(k, point["BLOCK_K"], 128)
    gi, gj, gk = m // bm, n // bn, k // bk
    steps = gi * gj * gk

    operands = [pipelined_operand("input", [m, k], [bm, bk], dtype, steps - 1 if gk > 1 or gj > 1 else gi - 1,
                                  [True, False, True]),
                pipelined_operand("input", [n, k] if a.rhs_transposed else [k, n],
                                  [bn, bk] if a.rhs_transposed else [bk, bn], dtype,
                                  steps - 1 if gk > 1 or gi > 1 else gj - 1, [False, True, True]),
                _output_operand(a, dtype, (m, n), (bm, bn), (gi, gj))]
    epilogue_ops = (a.tail_from or len(a.program.eqns)) - a.program.eqns.index(a.dot) - 1
    if a.group_reductions:  # each group statistic is a butterfly of lane rotations over the tile
        epilogue_ops += len(a.group_reductions) * group_epilogue_ops(a.group)
    return {"name": "matmul_epilogue", "grid": [gi, gj, gk], "steps": steps,
            "dimension_semantics": ["parallel", "parallel", "arbitrary"], "vmem_limit_bytes": point.get("VMEM_LIMIT_BYTES"),
            "operands": operands,
            "scratch": ([] if accumulates_in_output(a) else [{"shape": [bm, bn], "dtype": "float32", "itemsize": 4}])
            + _temporaries(a, bm, bn),
            "body": {"dots": [{"m": bm, "n": bn, "k": bk, "batch": 1, "dtype": dtype, "count": 1}],
                     "elementwise": bm * bn + epilogue_ops * bm * bn // max(gk, 1), "transcendental": 0},
            "repeat": 1}


def _output_operand(a: Analysis, dtype: str, mn: tuple[int, int], block: tuple[int, int],
                    grid: tuple[int, int]) -> dict[str, Any]:
    """The output as the kernel writes it: (bm, bn) tiles of a row output; (bm, 1) of a per-row one, once per N
    tile when the row reduction is split across them."""
    (m, n), (bm, bn), (gi, gj) = mn, block, grid
    if a.kinds[a.output] == "row":
        return pipelined_operand("output", [m, n], [bm, bn], dtype, gi * gj - 1, [True, True, False])
    tiles = gj if a.tile_reduction else 1
    return pipelined_operand("output", [tiles * m, 1], [bm, 1], dtype, gi * tiles - 1, [True, bool(a.tile_reduction),
                                                                                         False])


def _temporaries(a: Analysis, bm: int, bn: int) -> list[dict[str, Any]]:
    """The epilogue's tiles held in VMEM across its reductions (liveness.py), as f32 tiles of Mosaic scratch."""
    tiles = -(-temporaries_per_element(a) // 4)
    return [{"shape": [tiles, bm, bn], "dtype": "float32", "itemsize": 4}] if tiles else []


def _describe_batch(a: Analysis, point: dict[str, int]) -> dict[str, Any]:
    """Blocks of the batch axis for batched operands, whole arrays for the rest; the body's work is not
    modelled (the ranking is by traffic, VMEM fit and step count)."""
    batch = a.rows
    bb = legal_block(batch, point["BLOCK_B"], 1)
    steps = batch // bb
    operands = []
    for name in [*a.program.inputs, a.output]:
        shape = list(a.program.shapes[name])
        dtype = a.program.dtypes[name]
        batched = name == a.output or a.kinds.get(name) == "batch"
        block = [bb, *shape[1:]] if batched else shape
        operands.append(pipelined_operand("output" if name == a.output else "input", shape, block or [1], dtype,
                                          steps - 1 if batched else 0, [batched]))
    return {"name": "batch", "grid": [steps], "steps": steps, "dimension_semantics": ["parallel"],
            "vmem_limit_bytes": point.get("VMEM_LIMIT_BYTES"), "operands": operands, "scratch": [],
            "body": {"dots": [], "elementwise": 0, "transcendental": 0}, "repeat": 1}


def rank(a: Analysis, dtype: str, chip: dict[str, Any], target: str, vmem_limit: int):
    """Every point of the space with its estimate, fastest first; points over VMEM (with headroom) last, least
    VMEM first."""
    from maxkernel_tpu_pallas.api import estimate, fits_vmem

    keys = list(space(a, dtype))
    points = [dict(zip(keys, values, strict=False)) for values in _product([space(a, dtype)[k] for k in keys])]
    # a grid axis sized at run time (the grouped kernel's work items) is charged as the judge charges it
    reference_flops = a.staged.matmul_flops if a.template == "staged" and a.staged is not None else None
    ranked = []
    for point in points:
        point = {**point, **_fixed(a, vmem_limit)}
        kernels = describe(a, point, dtype)
        est = estimate(kernels if isinstance(kernels, list) else [kernels], chip, target, reference_flops)
        fits = fits_vmem(est)
        # points over VMEM last, the nearest to fitting first (a person asking for larger blocks than fit gets the
        # one the debugger repairs soonest, not the fastest on paper)
        ranked.append((not fits, est.seconds if fits else max(k.vmem_bytes for k in est.kernels), point, est))
    ranked.sort(key=lambda r: (r[0], r[1]))
    return [(point, est) for _, _, point, est in ranked]


def _product(lists: list[list[int]]) -> list[tuple[int, ...]]:
    out = [()]
    for values in lists:
        out = [prefix + (v,) for prefix in out for v in values]
    return out


def neighbours(a: Analysis, point: dict[str, int], dtype: str) -> list[tuple[str, dict[str, int]]]:
    """Moves through the space: one block constant doubled or halved, or (a longer stride, so a search far
    from the optimum gets there in fewer steps) multiplied or divided by 4; and, with several block
    constants, the whole tile scaled by 4 or 1/4 at once (each constant clamped to its range), the way a
    tile is grown, so a search need not walk a diagonal one axis at a time."""
    moves = []
    axes = {k: v for k, v in space(a, dtype).items() if len(v) >= 2 and k in point}
    index = {k: v.index(point[k]) if point[k] in v else 0 for k, v in axes.items()}
    for key, values in axes.items():
        i = index[key]
        for j, label in ((i + 1, "double"), (i - 1, "halve"), (i + 2, "quadruple"), (i - 2, "quarter")):
            if 0 <= j < len(values):
                moves.append((f"{label} {key}", {**point, key: values[j]}))
    if len(axes) > 1:
        for step, label in ((2, "quadruple every block"), (-2, "quarter every block")):
            scaled = {k: v[min(max(index[k] + step, 0), len(v) - 1)] for k, v in axes.items()}
            if any(scaled[k] != point[k] for k in axes):
                moves.append((label, {**point, **scaled}))
    return moves


def shrink_largest(a: Analysis, point: dict[str, int], dtype: str) -> dict[str, int] | None:
    """The debugger's answer to a VMEM overflow: halve the largest block constant that can shrink."""
    options = [(point[k], k, v) for k, v in space(a, dtype).items() if k in point and v.index(point[k]) > 0
               if point[k] in v]
    if not options:
        return None
    _, key, values = max(options)
    return {**point, key: values[values.index(point[key]) - 1]}
