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

from ..judge.work import _sub_jaxprs
from .body_work import body_work
from .known import Known, call_jaxpr
from .scalars import MAX_STEPS, Scalars


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


def _walk_blocks(blocks: np.ndarray, grid: tuple[int, ...]) -> dict[str, Any]:
    """Block-index changes between consecutive steps, and the grid axes the index follows (blocks: steps x dims)."""
    changed = np.any(blocks[1:] != blocks[:-1], axis=1)
    by_axis = blocks.reshape(*grid, blocks.shape[1])
    depends_on = [bool(np.any(np.ptp(by_axis, axis=axis) > 0)) for axis in range(len(grid))]
    return {"changes": int(changed.sum()), "depends_on": depends_on, "note": ""}


def _index_walk(bm, grid: tuple[int, ...], tables: list[np.ndarray] | None) -> dict[str, Any]:
    """How often the block index changes between consecutive steps, and the grid axes it follows. Index maps that
    read scalar-prefetch tables are walked when the tables are known constants (``tables``); otherwise, or when
    an axis is sized at run time (``tables`` None), the walk is data-dependent and not done."""
    if tables is None or not grid:
        return {"changes": None, "depends_on": None,
                "note": "data-dependent index map or grid (scalar prefetch)" if tables is None else ""}
    steps = math.prod(grid)
    closed = bm.index_map_jaxpr
    if tables:  # scalar-prefetched tables: the numpy evaluator reads them
        if steps > MAX_STEPS:
            return {"changes": None, "depends_on": None, "note": "scalar-prefetched index map over too many steps"}
        scal = Scalars(grid)
        for var, points in zip(closed.jaxpr.invars, scal.points, strict=False):
            scal.env[var] = points
        for var, table in zip(closed.jaxpr.invars[len(grid):], tables, strict=False):
            scal.env[var] = table
        for eqn in closed.jaxpr.eqns:
            scal.step(eqn)
        outs = [scal.value(v) for v in closed.jaxpr.outvars]
        if any(o is None for o in outs):
            return {"changes": None, "depends_on": None, "note": "index map reads values not known before it runs"}
        return _walk_blocks(np.stack([np.broadcast_to(o, (steps,)) for o in outs], axis=1), grid)
    fn = jax.jit(jax.vmap(lambda *g: jex_core.jaxpr_as_fun(closed)(*g)))
    points = np.indices(grid, dtype=np.int32).reshape(len(grid), steps)  # row-major: last axis fastest
    blocks = np.stack([np.asarray(b) for b in fn(*[jnp.asarray(p) for p in points])], axis=1)
    return _walk_blocks(blocks, grid)


def _scratch(aval) -> dict[str, Any]:
    """A scratch buffer: VMEM bytes for the model, or none for semaphores and SMEM (no itemsize to read)."""
    space = str(getattr(aval, "memory_space", "") or "").lower()
    dtype = getattr(aval, "dtype", None)
    itemsize = getattr(dtype, "itemsize", None)
    if itemsize is None or "semaphore" in space or "smem" in space or "sem" in str(dtype).lower():
        return {"shape": [int(d) for d in aval.shape], "dtype": str(dtype), "itemsize": 0, "space": space or "semaphore"}
    return {"shape": [int(d) for d in aval.shape], "dtype": str(dtype), "itemsize": int(itemsize), "space": "vmem"}


def _leading_operands(eqn, values: list[Any]) -> tuple[list[Any], list[Any]]:
    """(dynamic grid bounds, scalar-prefetch operands) of a pallas_call: their known values, or None each."""
    gm = eqn.params["grid_mapping"]
    refs = sum(1 for v in eqn.invars if "Ref" in type(getattr(v, "aval", None)).__name__)
    bounds = values[refs:refs + gm.num_dynamic_grid_bounds]
    start = refs + gm.num_dynamic_grid_bounds
    return bounds, values[start:start + gm.num_index_operands]


def _extent(g, bound) -> int | None:
    if isinstance(g, (int, np.integer)):
        return int(g)
    if bound is not None:
        return int(np.asarray(bound).reshape(-1)[0])  # sized at run time, but known before it runs
    return None


def _semantics(cp, gm) -> list[str]:
    """Each grid axis's dimension semantics, aligned with the grid (an axis jax.vmap added runs in parallel)."""
    named = [str(s).lower().split(".")[-1] for s in (getattr(cp, "dimension_semantics", None) or [])]
    if not named:
        return []
    for axis in sorted(getattr(gm, "vmapped_dims", ()) or ()):
        named.insert(axis, "parallel")
    return named


def _operands(gm, grid: tuple[int, ...], tables: list[np.ndarray] | None) -> list[dict[str, Any]]:
    """Each block-mapped operand: shapes, dtype, buffering, and how its block index walks the grid."""
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
            **_index_walk(bm, grid, tables),
        })
    return operands


def _body_scalars(eqn, grid: tuple[int, ...], prefetch: list[Any]) -> Scalars | None:
    """The evaluator of the body's scalar control over the grid (None when the grid is not known)."""
    if math.prod(grid or (1,)) > MAX_STEPS * 4:
        return None
    gm = eqn.params["grid_mapping"]
    scal = Scalars(grid, vmapped=tuple(getattr(gm, "vmapped_dims", ()) or ()))
    for var, table in zip(eqn.params["jaxpr"].invars, prefetch, strict=False):
        if table is not None:
            scal.env[var] = np.asarray(table)
    return scal


def describe_kernel(eqn, values: list[Any] | None = None) -> dict[str, Any]:
    """One pallas_call, with the known values of its operands (``values``, None where unknown)."""
    gm = eqn.params["grid_mapping"]
    bounds, prefetch = _leading_operands(eqn, values or [None] * len(eqn.invars))
    bound_iter = iter(bounds)
    # A grid axis sized by a traced value (scalar prefetch) has no extent at trace time: None, resolved later.
    extents = [_extent(g, None if isinstance(g, (int, np.integer)) else next(bound_iter, None)) for g in gm.grid]
    dynamic = [i for i, g in enumerate(extents) if g is None]
    grid = tuple(1 if g is None else g for g in extents)  # the index walk runs over the static axes only
    known_tables = None if dynamic or any(p is None for p in prefetch) else [np.asarray(p) for p in prefetch]
    cp = _compiler_params(eqn)
    return {
        "name": str(eqn.params.get("name") or getattr(eqn.params.get("name_and_src_info"), "name", "kernel")),
        "grid": extents,
        "dynamic_axes": dynamic,
        "steps": math.prod(grid) if grid else 1,  # static axes only; see dynamic_axes
        "dimension_semantics": _semantics(cp, gm),
        "vmem_limit_bytes": getattr(cp, "vmem_limit_bytes", None),
        "operands": _operands(gm, grid, known_tables),
        "scratch": [_scratch(a) for a in gm.scratch_avals],
        "body": body_work(eqn.params["jaxpr"], None if dynamic else _body_scalars(eqn, grid, prefetch)),
    }


def _leading_vars(eqn) -> list[Any]:
    """A pallas_call's operands whose values the model can use: dynamic grid bounds and scalar-prefetch tables."""
    gm = eqn.params["grid_mapping"]
    refs = sum(1 for v in eqn.invars if "Ref" in type(getattr(v, "aval", None)).__name__)
    return list(eqn.invars[:refs + gm.num_dynamic_grid_bounds + gm.num_index_operands])


def _needed(jaxpr, memo: dict[int, set]) -> set:
    """Variables of ``jaxpr`` some pallas_call's leading operands depend on (folding anything else is wasted)."""
    if id(jaxpr) in memo:
        return memo[id(jaxpr)]
    needed: set = set()
    for eqn in reversed(jaxpr.eqns):
        if eqn.primitive.name == "pallas_call":
            needed.update(v for v in _leading_vars(eqn) if isinstance(v, jex_core.Var))
            continue
        call = call_jaxpr(eqn)
        inner = _needed(call[0], memo) if call is not None else set()
        if inner:
            needed.update(o for o, i in zip(eqn.invars, call[0].invars, strict=False)
                          if i in inner and isinstance(o, jex_core.Var))
        if any(v in needed for v in eqn.outvars):
            needed.update(v for v in eqn.invars if isinstance(v, jex_core.Var))
    memo[id(jaxpr)] = needed
    return needed


def _has_kernel(jaxpr, memo: dict[int, bool]) -> bool:
    if id(jaxpr) not in memo:
        memo[id(jaxpr)] = any(e.primitive.name == "pallas_call" or any(_has_kernel(s, memo) for s, _ in _sub_jaxprs(e))
                              for e in jaxpr.eqns)
    return memo[id(jaxpr)]


def describe_kernels(closed_jaxpr) -> list[dict[str, Any]]:
    """Every pallas_call in the computation, outer loops (scan) counted in ``repeat``; the program's constants
    (and small values folded from them) tell scalar-prefetch tables and run-time grid extents where they can."""
    found: list[dict[str, Any]] = []
    needed_memo: dict[int, set] = {}
    kernel_memo: dict[int, bool] = {}

    def walk(jaxpr, times: int, known: Known) -> None:
        needed = _needed(jaxpr, needed_memo)
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "pallas_call":
                found.append({**describe_kernel(eqn, [known.value(v) for v in eqn.invars]), "repeat": times})
                continue
            call = call_jaxpr(eqn)
            if call is not None and _has_kernel(call[0], kernel_memo):
                walk(call[0], times, known.inner(call[0], eqn.invars, call[1]))
                continue
            if any(v in needed for v in eqn.outvars):
                known.fold(eqn)
            for sub, repeat in _sub_jaxprs(eqn):
                if _has_kernel(sub, kernel_memo):
                    walk(sub, times * repeat, Known(budget=known.budget))  # inside loops: values unknown

    walk(closed_jaxpr.jaxpr, 1, Known.of(closed_jaxpr))
    return found
