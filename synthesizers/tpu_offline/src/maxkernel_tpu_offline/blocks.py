"""Block-size rules shared by the parameter space and the generated modules.

``legal_block`` is copied verbatim into every generated module (as ``_block``),
so the space ranks exactly the blocks the kernels will use.
"""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np


def legal_block(n, target, align):
    """The largest multiple of ``align`` dividing ``n`` and not above ``target``; ``n`` when none is."""
    b = min(target, n) // align * align
    while b >= align:
        if n % b == 0:
            return b
        b -= align
    return n


def block_helper_source() -> str:
    """``legal_block`` as the generated module's ``_block``."""
    return inspect.getsource(legal_block).replace("def legal_block(", "def _block(", 1)


def itemsize(dtype: str) -> int:
    """Bytes per element of a dtype named as jax names it (ml_dtypes knows bfloat16, the float8s, int4)."""
    return np.dtype(getattr(ml_dtypes, dtype, dtype)).itemsize


def sublane_align(dtype: str) -> int:
    """Rows per (sublane x lane) tile: 8 for 32-bit types, 16 for 16-bit, 32 for 8-bit."""
    return 8 * max(4 // itemsize(dtype), 1)


def pipelined_operand(role: str, array: list[int], block: list[int], dtype: str, changes: int,
                      depends: list[bool]) -> dict:
    """One BlockSpec operand as the cost model reads a kernel description: double-buffered, pipelined, its
    block fetched ``changes + 1`` times, its index depending on the grid axes flagged in ``depends``."""
    return {"role": role, "index": 0, "array_shape": array, "block_shape": block, "dtype": dtype,
            "itemsize": itemsize(dtype), "buffers": 2, "pipelined": True, "changes": changes, "depends_on": depends}
