"""The staged template's search space and its kernels as the cost model sees them, per point."""

from __future__ import annotations

import functools
import math
from typing import Any

from ..blocks import itemsize, pipelined_operand, sublane_align
from . import conv as staged_conv
from . import grouped as staged_grouped
from . import matmul as staged_matmul
from . import planar as staged_planar
from .spec import Matmul, StagedSpec


def space(spec: StagedSpec, powers: list[int]) -> dict[str, list[int]]:
    align = sublane_align(spec.dtype)
    m = max(mm.m for mm in spec.matmuls)
    n = max(mm.n for mm in spec.matmuls)
    k = max(mm.k for mm in spec.matmuls)
    return {"BLOCK_M": [p for p in powers if align <= p <= max(m, align) and p <= 2048],
            "BLOCK_N": [p for p in powers if 128 <= p <= max(n, 128) and p <= 2048],
            "BLOCK_K": [p for p in powers if 128 <= p <= max(k, 128) and p <= 2048]}


def describe(spec: StagedSpec, point: dict[str, int]) -> list[dict[str, Any]]:
    """One cost-model description per matmul kernel, with the blocks the runtime will pick for its shapes."""
    kernels = []
    for mm in spec.matmuls:
        if mm.groups:
            kernels.append(_describe_grouped(mm, point))
            continue
        if mm.direct is not None:
            kernels.append(_describe_planar(mm, point) if mm.planar else _describe_direct(mm, point))
            continue
        bm, mp = staged_matmul._tile(mm.m, staged_matmul._rows_target(
            mm.k, mm.n, itemsize(mm.dtype), point["BLOCK_M"], point["BLOCK_K"], point["BLOCK_N"]), sublane_align(mm.dtype))
        bn, np_ = staged_matmul._tile(mm.n, point["BLOCK_N"], 128)
        bk, kp = staged_matmul._tile(mm.k, point["BLOCK_K"], 128)
        op = functools.partial(_operand, mm)
        bb = staged_matmul._batch_block(mm.b, mp, kp, np_, bm, itemsize(mm.dtype))
        if bb > 1:
            kernels.append(_describe_batched(mm, point, bb, mp, kp, np_, op))
            continue
        gb, gi, gj, gk = mm.b, mp // bm, np_ // bn, kp // bk
        steps = gb * gi * gj * gk

        kernels.append({
            "name": f"matmul ({mm.source})", "grid": [gb, gi, gj, gk], "steps": steps,
            "dimension_semantics": ["parallel", "parallel", "parallel", "arbitrary"],
            "vmem_limit_bytes": point.get("VMEM_LIMIT_BYTES"),
            "operands": [op("input", [gb, mp, kp], [1, bm, bk], steps - 1 if gk > 1 or gj > 1 else gb * gi - 1,
                            [True, True, False, True]),
                         op("input", [gb, kp, np_], [1, bk, bn], steps - 1 if gk > 1 or gi > 1 else gb * gj - 1,
                            [True, False, True, True]),
                         op("output", [gb, mp, np_], [1, bm, bn], gb * gi * gj - 1, [True, True, True, False],
                            mm.out_dtype or mm.dtype)],
            "scratch": [{"shape": [bm, bn], "dtype": "float32", "itemsize": 4}],
            "body": {"dots": [{"m": bm, "n": bn, "k": bk, "batch": 1, "dtype": mm.dtype, "count": 1}],
                     "elementwise": bm * bn, "transcendental": 0},
            "repeat": mm.repeat})
    return kernels


def _describe_grouped(mm: Matmul, point: dict[str, int]) -> dict[str, Any]:
    """staged_grouped._grouped_matmul: grid (N blocks, work items, K blocks), the item axis sized at run time
    (``dynamic_axes``: the model charges it the trips that reach the reference's matmul work, as the judge does),
    every block chosen by a scalar-prefetched item table (data-dependent: each operand charged once at its size)."""
    tm, mp, tn, np_, tk, kp = staged_grouped._grouped_blocks(mm.m, mm.k, mm.n, itemsize(mm.dtype))
    grid = [np_ // tn, None, kp // tk]
    op = functools.partial(_operand, mm)
    return {"name": "grouped matmul", "grid": grid, "dynamic_axes": [1], "steps": grid[0] * grid[2],
            "dimension_semantics": ["parallel", "arbitrary", "arbitrary"],
            "vmem_limit_bytes": point.get("VMEM_LIMIT_BYTES"),
            "operands": [op("input", [mp, kp], [tm, tk], None, [False, True, True]),
                         op("input", [mm.groups, kp, np_], [1, tk, tn], None, [True, True, True]),
                         op("output", [mp, np_], [tm, tn], None, [True, True, False], mm.out_dtype or mm.dtype)],
            "scratch": [{"shape": [tm, tn], "dtype": "float32", "itemsize": 4}],
            "body": {"dots": [{"m": tm, "n": tn, "k": tk, "batch": 1, "dtype": mm.dtype, "count": 1}],
                     "elementwise": 3 * tm * tn, "transcendental": 0},
            "repeat": mm.repeat}


def _describe_batched(mm: Matmul, point: dict[str, int], bb: int, m: int, k: int, n: int, op) -> dict[str, Any]:
    """staged_matmul._batched_matmul: bb whole (M, K) @ (K, N) products per step, grid (B / bb,)."""
    steps = mm.b // bb
    return {"name": f"batched matmul ({mm.source})", "grid": [steps], "steps": steps,
            "dimension_semantics": ["parallel"], "vmem_limit_bytes": point.get("VMEM_LIMIT_BYTES"),
            "operands": [op("input", [mm.b, m, k], [bb, m, k], steps - 1, [True]),
                         op("input", [mm.b, k, n], [bb, k, n], steps - 1, [True]),
                         op("output", [mm.b, m, n], [bb, m, n], steps - 1, [True], mm.out_dtype or mm.dtype)],
            "scratch": [],
            "body": {"dots": [{"m": m, "n": n, "k": k, "batch": bb, "dtype": mm.dtype, "count": 1}],
                     "elementwise": bb * m * n, "transcendental": 0},
            "repeat": mm.repeat}


def _operand(mm: Matmul, role: str, array: list[int], block: list[int], changes: int, depends: list[bool],
             dtype: str | None = None) -> dict[str, Any]:
    """An operand of one of ``mm``'s kernels, in its input dtype unless told."""
    return pipelined_operand(role, array, block, dtype or mm.dtype, changes, depends)


def _describe_direct(mm: Matmul, point: dict[str, int]) -> dict[str, Any]:
    """The direct convolution kernel as the runtime emits it: grid (image, [output plane,] row block); a 2-D
    image whole per step, a 3-D input as one plane per depth tap; the taps' patch through the MXU."""
    n, spatial, c, window, o = mm.direct
    g = staged_conv._direct_geometry(spatial, c, window, o, itemsize(mm.dtype))
    planes, h, width, bh, row, k = g["planes"], spatial[-2], g["width"], g["rows"], g["row"], g["k"]
    oh, ow = g["oh"], g["ow"]
    op = functools.partial(_operand, mm)
    transposed = []  # a channels-first store's f32 image of the output
    if planes == 1:
        grid = [n, oh // bh]
        images = [op("input", [n, h, width, c], [1, h, width, c], n - 1, [True, False])]
        out = op("output", [n, oh, ow, o], [1, bh, ow, o], n * (oh // bh) - 1, [True, True], mm.out_dtype or mm.dtype)
        if mm.channels_first:
            out = op("output", [n, o, oh, ow], [1, o, oh, ow], n - 1, [True, False], mm.out_dtype or mm.dtype)
            transposed = [{"shape": [o, oh, row], "dtype": "float32", "itemsize": 4}]
    else:
        od = spatial[0] - planes + 1
        grid = [n, od, oh // bh]
        images = [op("input", [n, spatial[0], h, width, c], [1, 1, h, width, c], n * od - 1, [True, True, False])
                  for _ in range(planes)]
        out = op("output", [n, od, oh, ow, o], [1, 1, bh, ow, o], n * od * (oh // bh) - 1, [True, True, True],
                 mm.out_dtype or mm.dtype)
    return {"name": "direct convolution", "grid": grid, "steps": math.prod(grid),
            "dimension_semantics": ["parallel"] * (len(grid) - 1) + ["arbitrary"],
            "vmem_limit_bytes": point.get("VMEM_LIMIT_BYTES"),
            "operands": [*images, op("input", [g["dots"], k, o], [g["dots"], k, o], 0, [False] * len(grid)), out],
            "scratch": [{"shape": [bh * row, o], "dtype": "float32", "itemsize": 4},  # the product
                        {"shape": [bh * row, k], "dtype": mm.dtype, "itemsize": itemsize(mm.dtype)},  # the patch
                        *transposed],
            "body": {"dots": [{"m": bh * row, "n": o, "k": k, "batch": 1, "dtype": mm.dtype, "count": g["dots"]}],
                     "elementwise": bh * row * o * g["dots"], "transcendental": 0},
            "repeat": mm.repeat}


def _describe_planar(mm: Matmul, point: dict[str, int]) -> dict[str, Any]:
    """The few-channel kernel as the runtime emits it: grid (image,), the image and its output whole, channels
    first; per row group one product of the weights (O, taps x Cp) and the patch (taps x Cp, rows x width)."""
    n, spatial, c, window, o = mm.direct
    g = staged_planar._planar_geometry(spatial, c, window, o)
    op = functools.partial(_operand, mm)
    lanes = staged_planar.PLANAR_ROWS * g["width"]
    out = [o, 1] if mm.reduces else [o, g["oh"], g["ow"]]  # per-channel sums, or the image's output
    return {"name": "few-channel convolution", "grid": [n], "steps": n, "dimension_semantics": ["parallel"],
            "vmem_limit_bytes": point.get("VMEM_LIMIT_BYTES"),
            "operands": [op("input", [n, c, g["h"], g["width"]], [1, c, g["h"], g["width"]], n - 1, [True]),
                         op("input", [o, g["k"]], [o, g["k"]], 0, [False]),
                         op("output", [n, *out], [1, *out], n - 1, [True], mm.out_dtype or mm.dtype)],
            "scratch": [],
            "body": {"dots": [{"m": o, "n": lanes, "k": g["k"], "batch": 1, "dtype": mm.dtype, "count": g["groups"]}],
                     "elementwise": o * lanes * g["groups"], "transcendental": 0},
            "repeat": mm.repeat}
