"""Uninitialised memory made hostile in the checker's interpreters: what a kernel reads before it wrote it
holds an unpredictable value, never zeros or the interpreters' own fixed fill.

Pallas' interpreters fill scratch and output buffers with a fixed value (NaN, or an integer type's extreme);
a kernel can branch on that value and be exact in the interpreter and wrong on the chip, whose memory holds
whatever it held. In the checker (the judge's own process, which never held candidate code) both fills are
replaced by values drawn afresh for every buffer from ``secrets``: a float is a NaN or a large random number,
an integer any value of its type but 0 and its extremes, a boolean either. Installed once per process.
"""

from __future__ import annotations

import secrets

import jax.numpy as jnp
import numpy as np

_installed = False


def _hostile(dtype):
    dtype = np.dtype(dtype)
    if jnp.issubdtype(dtype, jnp.floating):
        return np.nan if secrets.randbelow(2) else float(secrets.randbelow(2**20) + 2**20) * (-1) ** secrets.randbelow(2)
    if jnp.issubdtype(dtype, jnp.bool_):
        return bool(secrets.randbelow(2))
    if jnp.issubdtype(dtype, jnp.integer):
        info = jnp.iinfo(dtype)
        span = int(info.max) - int(info.min) - 2
        value = int(info.min) + 1 + secrets.randbelow(max(span, 1))
        return value if value != 0 else 1
    return None


def install() -> None:
    """Replace both interpreters' fill of uninitialised buffers (plain interpret mode's and the TPU-semantics
    interpreter's) with hostile values, in this process."""
    global _installed
    if _installed:
        return
    from jax._src.pallas import primitives
    from jax._src.pallas.mosaic.interpret import utils

    plain, tpu = primitives.uninitialized_value, utils.get_uninitialized_value

    def uninitialized_value(shape, dtype):
        value = _hostile(dtype)
        return plain(shape, dtype) if value is None else jnp.full(shape, value, dtype)

    def get_uninitialized_value(dtype, uninitialized_memory):
        value = _hostile(dtype)
        return tpu(dtype, uninitialized_memory) if value is None else value

    primitives.uninitialized_value = uninitialized_value
    utils.get_uninitialized_value = get_uninitialized_value
    _installed = True
