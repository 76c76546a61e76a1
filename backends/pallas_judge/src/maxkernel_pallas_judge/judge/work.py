"""Where the work of a traced computation happens: inside Pallas kernels or in jnp glue.

Walks a jaxpr (and every sub-jaxpr: jit, custom_jvp/vjp, cond, scan, while) and
counts, separately for kernel bodies and for the code around them:

* matmul/conv FLOPs (``dot_general``, ``conv_general_dilated``), and
* arithmetic element-ops (elementwise math and reductions; pure data movement
  such as reshape, pad, transpose or broadcast is not work and is not counted).

A kernel body runs once per grid step, so its counts are multiplied by the
number of grid steps. Runs in a worker (imports jax); the verdict built on
these counts is made in the parent (``proof.py``).
"""

from __future__ import annotations

import math
from typing import Any

from jax.extend import core as jex_core

ARITHMETIC = frozenset(["add", "sub", "mul", "div", "rem", "neg", "abs", "sign", "max", "min", "pow", "integer_pow", "square", "sqrt", "rsqrt", "cbrt", "exp", "exp2", "expm1", "log", "log1p", "tanh", "logistic", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erf_inv", "lgamma", "digamma", "floor", "ceil", "round", "nextafter", "is_finite", "select_n", "clamp", "and", "or", "not", "xor", "eq", "ne", "lt", "le", "gt", "ge", "shift_left", "shift_right_logical", "shift_right_arithmetic", "population_count", "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "reduce_xor", "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "reduce_precision", "sort", "top_k"])
MATMUL = frozenset({"dot_general", "ragged_dot_general", "conv_general_dilated"})
CALLBACKS = frozenset({"pure_callback", "io_callback", "callback", "host_callback", "outside_call"})
KERNELS = frozenset({"pallas_call"})


def _size(aval: Any) -> int:
    shape = getattr(aval, "shape", ())
    return math.prod(shape) if shape else 1


def _dot_flops(eqn) -> int:
    if eqn.primitive.name == "ragged_dot_general":  # grouped matmul: each row meets one group's matrix
        (lhs_contract, _), _ = eqn.params["ragged_dot_dimension_numbers"].dot_dimension_numbers
    else:
        (lhs_contract, _), _ = eqn.params["dimension_numbers"]
    lhs = eqn.invars[0].aval
    contracted = math.prod(lhs.shape[d] for d in lhs_contract) if lhs_contract else 1
    return 2 * _size(eqn.outvars[0].aval) * contracted


def _conv_flops(eqn) -> int:
    rhs = eqn.invars[1].aval  # kernel: out_features x in_features/groups x spatial...
    dn = eqn.params["dimension_numbers"]
    spec = dn.rhs_spec if hasattr(dn, "rhs_spec") else (0, 1, *range(2, rhs.ndim))
    per_output = math.prod(rhs.shape[d] for d in spec[1:])  # in/groups x window
    return 2 * _size(eqn.outvars[0].aval) * per_output


def _grid_steps(eqn) -> int:
    grid = getattr(eqn.params.get("grid_mapping"), "grid", ()) or ()
    return math.prod(int(g) if isinstance(g, int) else 1 for g in grid) or 1


def _block_bytes(shape, dtype) -> int:
    dims = [getattr(d, "block_size", d) for d in shape]
    return math.prod(int(d) if isinstance(d, int) else 1 for d in dims) * dtype.itemsize


def vmem_estimate(eqn) -> int | None:
    """Bytes of VMEM a pallas_call asks for: double-buffered blocks plus scratch (before tile padding)."""
    try:
        gm = eqn.params["grid_mapping"]
        blocks = sum(2 * _block_bytes(bm.block_shape, bm.array_aval.dtype) for bm in gm.block_mappings)
        # semaphores (no itemsize) and SMEM scratch take no VMEM
        scratch = sum(_size(a) * getattr(a.dtype, "itemsize", 0) for a in gm.scratch_avals
                      if "smem" not in str(getattr(a, "memory_space", "")).lower())
        return int(blocks + scratch)
    except (AttributeError, KeyError, TypeError):
        return None  # a Pallas version with other internals: the estimate is optional


def _sub_jaxprs(eqn):
    """(jaxpr, repeat count) for every jaxpr nested in an equation's parameters."""
    repeat = int(eqn.params.get("length", 1)) if eqn.primitive.name == "scan" else 1
    for value in eqn.params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, jex_core.ClosedJaxpr):
                yield item.jaxpr, repeat
            elif isinstance(item, jex_core.Jaxpr):
                yield item, repeat


def work_stats(closed_jaxpr) -> dict[str, Any]:
    """Counts of matmul FLOPs and arithmetic element-ops, in kernels and in glue."""
    stats = {"pallas_calls": 0, "grid_steps": [], "vmem_bytes": [], "kernel_flops": 0, "glue_flops": 0,
             "kernel_elementwise": 0, "glue_elementwise": 0, "callbacks": [], "glue_ops": {}}

    def walk(jaxpr, times: int, in_kernel: bool) -> None:
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            if name in KERNELS:
                stats["pallas_calls"] += 1
                steps = _grid_steps(eqn)
                stats["grid_steps"].append(steps)
                stats["vmem_bytes"].append(vmem_estimate(eqn))
                walk(eqn.params["jaxpr"], times * steps, True)
                continue
            if name in CALLBACKS:
                stats["callbacks"].append(name)
            where = "kernel" if in_kernel else "glue"
            if name in ("dot_general", "ragged_dot_general"):
                stats[f"{where}_flops"] += times * _dot_flops(eqn)
            elif name == "conv_general_dilated":
                stats[f"{where}_flops"] += times * _conv_flops(eqn)
            elif name in ARITHMETIC:
                elems = max([_size(v.aval) for v in eqn.outvars] + [_size(getattr(v, "aval", None)) for v in eqn.invars])
                stats[f"{where}_elementwise"] += times * elems
            if not in_kernel and (name in MATMUL or name in ARITHMETIC):
                stats["glue_ops"][name] = stats["glue_ops"].get(name, 0) + 1
            for sub, repeat in _sub_jaxprs(eqn):
                walk(sub, times * repeat, in_kernel)

    walk(closed_jaxpr.jaxpr, 1, False)
    return stats
