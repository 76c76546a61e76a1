"""Describe each ``pallas_call`` of a traced computation for the cost model (runs in a worker).

For every kernel: the grid, dimension semantics, VMEM limit, each operand's
array and block shapes, dtype and buffering, and, by evaluating its index map
over the whole grid at once (vectorised with ``jax.vmap``), how many times its
block index changes between consecutive grid steps (Pallas skips the copy when
it does not) and which grid axes it depends on. Plus the body's work per grid
step: matmul shapes, elementwise and transcendental op counts, and the bytes
its own DMAs move (``pltpu.make_async_copy`` from operands left in HBM with
``pl.ANY``). Expert kernels' other pieces are described, not refused: scratch
semaphores and SMEM take no VMEM, a grid axis sized at run time (scalar
prefetch, as megablox's) is marked dynamic for the cost model to resolve.

Only plain numbers leave this module; the model itself (``costmodel.py``) runs
in the parent.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jex_core

from ..judge.work import ARITHMETIC, _sub_jaxprs

TRANSCENDENTAL = frozenset(["exp", "exp2", "expm1", "log", "log1p", "tanh", "logistic", "sin", "cos", "tan", "erf", "erfc", "erf_inv", "rsqrt", "sqrt", "cbrt", "pow", "atan2", "asin", "acos", "atan", "sinh", "cosh"])
#: Past this many grid steps the change counts are computed on a strided sample and scaled.
MAX_EXACT_STEPS = 1 << 24


def _block_dims(block_shape) -> list[int]:
    dims = []
    for d in block_shape:
        size = getattr(d, "block_size", d)
        dims.append(int(size) if isinstance(size, (int, np.integer)) else 1)  # None / Squeezed: one element
    return dims


def _compiler_params(eqn) -> Any:
    cp = eqn.params.get("compiler_params")
    if isinstance(cp, dict):
        cp = cp.get("mosaic_tpu") or cp.get("mosaic") or next(iter(cp.values()), None)
    return cp


def _index_walk(bm, grid: tuple[int, ...], data_dependent: bool) -> dict[str, Any]:
    """How often the block index changes between consecutive steps, and the grid axes it follows; not walked
    when the index maps read scalar-prefetched values or an axis is sized at run time (``data_dependent``)."""
    if data_dependent or not grid:
        return {"changes": None, "depends_on": None,
                "note": "data-dependent index map or grid (scalar prefetch)" if data_dependent else ""}
    steps = math.prod(grid)
    closed = bm.index_map_jaxpr
    fn = jax.jit(jax.vmap(lambda *g: jex_core.jaxpr_as_fun(closed)(*g)))
    points = np.indices(grid, dtype=np.int32).reshape(len(grid), steps)  # row-major: last axis fastest
    blocks = np.stack([np.asarray(b) for b in fn(*[jnp.asarray(p) for p in points])], axis=1)
    changed = np.any(blocks[1:] != blocks[:-1], axis=1)
    by_axis = blocks.reshape(*grid, blocks.shape[1])
    depends_on = [bool(np.any(np.ptp(by_axis, axis=axis) > 0)) for axis in range(len(grid))]
    return {"changes": int(changed.sum()), "depends_on": depends_on, "note": ""}


def _dma_bytes(eqn) -> int:
    """Bytes one ``dma_start`` moves: its destination window (refs after their ``.at[...]`` transforms)."""
    from jax._src.pallas.mosaic.primitives import _dma_unflatten

    _src, dst, *_ = _dma_unflatten(eqn.params["tree"], [v.aval for v in eqn.invars])
    return math.prod(dst.shape) * np.dtype(dst.dtype).itemsize


def _body_work(jaxpr) -> dict[str, Any]:
    work = {"dots": [], "elementwise": 0, "transcendental": 0, "dma_bytes": 0}

    def walk(j, times: int) -> None:
        for eqn in j.eqns:
            name = eqn.primitive.name
            if name == "dot_general":
                (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
                lhs, rhs = eqn.invars[0].aval, eqn.invars[1].aval
                free_l = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
                free_r = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
                work["dots"].append({
                    "m": math.prod(lhs.shape[d] for d in free_l), "n": math.prod(rhs.shape[d] for d in free_r),
                    "k": math.prod(lhs.shape[d] for d in lc), "batch": math.prod(lhs.shape[d] for d in lb),
                    "dtype": str(lhs.dtype), "count": times,
                })
            elif name == "dma_start":
                work["dma_bytes"] += times * _dma_bytes(eqn)
            elif name in ARITHMETIC:
                # max of inputs and outputs: a reduction's work is the size of what it reads
                avals = [v.aval for v in (*eqn.outvars, *eqn.invars) if hasattr(getattr(v, "aval", None), "shape")]
                size = max([math.prod(a.shape) for a in avals] + [1])
                work["transcendental" if name in TRANSCENDENTAL else "elementwise"] += times * size
            for sub, repeat in _sub_jaxprs(eqn):
                walk(sub, times * repeat)

    walk(jaxpr, 1)
    return work


def _scratch(aval) -> dict[str, Any]:
    """A scratch buffer: VMEM bytes for the model, or none for semaphores and SMEM (no itemsize to read)."""
    space = str(getattr(aval, "memory_space", "") or "").lower()
    dtype = getattr(aval, "dtype", None)
    itemsize = getattr(dtype, "itemsize", None)
    if itemsize is None or "semaphore" in space or "smem" in space or "sem" in str(dtype).lower():
        return {"shape": [int(d) for d in aval.shape], "dtype": str(dtype), "itemsize": 0, "space": space or "semaphore"}
    return {"shape": [int(d) for d in aval.shape], "dtype": str(dtype), "itemsize": int(itemsize), "space": "vmem"}


def describe_kernel(eqn) -> dict[str, Any]:
    gm = eqn.params["grid_mapping"]
    # A grid axis sized by a traced value (scalar prefetch) has no extent at trace time: None, resolved later.
    extents = [int(g) if isinstance(g, (int, np.integer)) else None for g in gm.grid]
    dynamic = [i for i, g in enumerate(extents) if g is None]
    grid = tuple(1 if g is None else g for g in extents)  # the index walk runs over the static axes only
    cp = _compiler_params(eqn)
    operands = []
    for n, bm in enumerate(gm.block_mappings):
        aval = bm.array_aval
        space = str(getattr(bm.block_aval, "memory_space", "") or "").lower()
        pipeline = getattr(bm, "pipeline_mode", None)
        operands.append({
            "role": "input" if n < gm.num_inputs else "output",
            "index": n if n < gm.num_inputs else n - gm.num_inputs,
            "array_shape": [int(d) for d in aval.shape],
            "block_shape": _block_dims(bm.block_shape),
            "dtype": str(aval.dtype),
            "itemsize": int(aval.dtype.itemsize),
            "buffers": int(getattr(pipeline, "buffer_count", 2) or 2),
            "pipelined": not any(s in space for s in ("any", "hbm", "smem")),
            **_index_walk(bm, grid, bool(gm.num_index_operands or dynamic)),
        })
    return {
        "name": str(eqn.params.get("name") or getattr(eqn.params.get("name_and_src_info"), "name", "kernel")),
        "grid": extents,
        "dynamic_axes": dynamic,
        "steps": math.prod(grid) if grid else 1,  # static axes only; see dynamic_axes
        "dimension_semantics": [str(s).lower().split(".")[-1] for s in (getattr(cp, "dimension_semantics", None) or [])],
        "vmem_limit_bytes": getattr(cp, "vmem_limit_bytes", None),
        "operands": operands,
        "scratch": [_scratch(a) for a in gm.scratch_avals],
        "body": _body_work(eqn.params["jaxpr"]),
    }


def describe_kernels(closed_jaxpr) -> list[dict[str, Any]]:
    """Every pallas_call in the computation, outer loops (scan) counted in ``repeat``."""
    found = []

    def walk(jaxpr, times: int) -> None:
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "pallas_call":
                found.append({**describe_kernel(eqn), "repeat": times})
                continue
            for sub, repeat in _sub_jaxprs(eqn):
                walk(sub, times * repeat)

    walk(closed_jaxpr.jaxpr, 1)
    return found


CHIP_FIELDS = ("generation", "num_cores", "num_lanes", "num_sublanes", "mxu_column_size", "num_mxus",
               "vmem_capacity_bytes", "smem_capacity_bytes", "hbm_capacity_bytes", "mem_bw_bytes_per_second",
               "bf16_ops_per_second", "int8_ops_per_second", "fp8_ops_per_second")


def chip_figures(target: str) -> dict[str, Any]:
    """The installed jax's chip table for ``target``, plus the topology's cores per device."""
    from ..judge.compile import target_device
    from ..targets import tpu_info

    info = tpu_info(target)
    figures = {name: int(getattr(info, name)) for name in CHIP_FIELDS if hasattr(info, name)}
    device = target_device(target)
    figures["cores_per_device"] = int(getattr(device, "num_cores", 1) or 1)
    figures["device_kind"] = device.device_kind
    figures["source"] = f"jax {jax.__version__} pltpu.get_tpu_info_for_chip({target!r})"
    return figures
