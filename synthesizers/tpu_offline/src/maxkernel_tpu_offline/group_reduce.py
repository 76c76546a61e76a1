"""GroupNorm's statistics in a TPU kernel: each aligned group of a row's lanes reduced in place.

A butterfly of log2(S) lane rotations, each combining a lane with the lane whose index differs in one bit,
which stays inside an aligned group of a power-of-2 size: a fixed 4 vector ops per step per element, where
splitting the lane axis into (G, S) would make Mosaic relayout the tile twice. The generated module carries it
as ``_group_reduce`` (the name the chip-neutral emission calls, ``maxkernel_synthesis.groups.reduce_text``).
"""

from __future__ import annotations

import inspect
import math

import jax
import jax.numpy as jnp
from jax.experimental.pallas import tpu as pltpu

#: Vector ops per element per butterfly step: two lane rotations, a select, the combine.
OPS_PER_STEP = 4


def group_reduce(x, op, size):
    """Reduce each aligned group of ``size`` lanes of ``x`` with ``op`` ("sum", "max" or "min"); every lane gets
    its group's value. The partner of lane i is lane i XOR t at step t: whichever rotation brought that lane
    is chosen by rotating the lane index too, so the result does not hang on the rotation's direction."""
    combine = {"sum": jnp.add, "max": jnp.maximum, "min": jnp.minimum}[op]
    dtype = x.dtype
    x = x.astype(jnp.float32)  # 32-bit lanes: rotations of packed 16-bit vectors are not all lowered
    axis, width = x.ndim - 1, x.shape[-1]
    lane = jax.lax.broadcasted_iota(jnp.int32, x.shape, axis)
    t = 1
    while t < size:
        came_from = pltpu.roll(lane, t, axis)
        partner = jnp.where(came_from == (lane ^ t), pltpu.roll(x, t, axis), pltpu.roll(x, width - t, axis))
        x = combine(x, partner)
        t *= 2
    return x.astype(dtype)


def helper_source() -> str:
    """``group_reduce`` as the generated module's ``_group_reduce``."""
    return inspect.getsource(group_reduce).replace("def group_reduce(", "def _group_reduce(", 1)


def epilogue_ops(size: int) -> int:
    """Vector ops per element of one grouped reduction."""
    return OPS_PER_STEP * max(int(math.log2(size)), 1)
