"""Uninitialised memory made hostile in the checker's interpreters: what a kernel reads before it wrote it
holds an unpredictable value, never zeros or the interpreters' own fixed fill.

Pallas' interpreters fill scratch and output buffers with a fixed value (NaN, or an integer type's extreme);
a kernel can branch on that value and be exact in the interpreter and wrong on the chip, whose memory holds
whatever it held. In the checker (the judge's own process, which never held candidate code) both fills are
replaced by values drawn afresh for every buffer from ``secrets``, from two families that never meet, so a
kernel whose output follows what it read unwritten always differs between the two interpreters (the
semantic check, ``semantics.py``), whatever the draw:

- the plain interpreter's (the verdict's outputs): a float is a NaN, an infinity or a finite number of
  magnitude in [2^20, 2^21); an integer any value of magnitude in the upper half of its type's range (never
  0 or the extremes);
- the TPU-semantics interpreter's: a float is finite, of magnitude log-uniform in [2^-10, 2^19]; an integer
  of magnitude in [1, the lower half].

Drawn independently from one family, two NaNs compare equal (as the same infinity does): that is how the
semantic check once missed such a read one time in four. Signs are drawn too. Booleans cannot be split in two
families; each interpreter draws either. Installed once per process.
"""

from __future__ import annotations

import secrets

import jax.numpy as jnp
import numpy as np

_installed = False


def _sign() -> int:
    return (-1) ** secrets.randbelow(2)


def _hostile_float(chip: bool, dtype) -> float:
    if chip:
        # log-uniform over [2^-10, 2^19), kept inside narrow types' range (float16's max is 65504)
        magnitude = 2.0 ** (-10 + 29 * secrets.randbelow(2**20) / 2**20)
        return _sign() * min(magnitude, float(jnp.finfo(dtype).max) / 4)
    kind = secrets.randbelow(3)
    if kind == 0:
        return np.nan
    if kind == 1:
        return _sign() * np.inf
    if float(jnp.finfo(dtype).max) < 2.0**21:  # no finite value of this type is out of the chip's family
        return _sign() * np.inf
    return _sign() * float(secrets.randbelow(2**20) + 2**20)


def _hostile_int(chip: bool, dtype) -> int:
    info = jnp.iinfo(dtype)
    top = min(int(info.max), -int(info.min)) - 1 if int(info.min) < 0 else int(info.max) - 1
    half = max(top // 2, 1)
    magnitude = 1 + secrets.randbelow(half) if chip else half + 1 + secrets.randbelow(max(top - half, 1))
    return magnitude * _sign() if int(info.min) < 0 else magnitude


def _hostile(dtype, chip: bool):
    """A value for an unwritten buffer of ``dtype``, from the chip interpreter's family or the plain one's."""
    dtype = np.dtype(dtype)
    if jnp.issubdtype(dtype, jnp.floating):
        return _hostile_float(chip, dtype)
    if jnp.issubdtype(dtype, jnp.bool_):
        return bool(secrets.randbelow(2))
    if jnp.issubdtype(dtype, jnp.integer):
        return _hostile_int(chip, dtype)
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
        value = _hostile(dtype, chip=False)
        return plain(shape, dtype) if value is None else jnp.full(shape, value, dtype)

    def get_uninitialized_value(dtype, uninitialized_memory):
        value = _hostile(dtype, chip=True)
        return tpu(dtype, uninitialized_memory) if value is None else value

    primitives.uninitialized_value = uninitialized_value
    utils.get_uninitialized_value = get_uninitialized_value
    _installed = True
