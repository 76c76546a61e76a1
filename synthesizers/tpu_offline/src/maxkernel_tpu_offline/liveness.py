"""The VMEM an epilogue's temporaries take, so the fit check rules out tiles whose epilogue cannot fit.

Mosaic streams a chain of elementwise ops through vector registers, but a
reduction over the tile needs its whole operand first: every tile-sized value
still to be used after a reduction is held in VMEM across it, beside the
pipelined blocks and the accumulator. The grouped reduction (groups.py) also
holds its own working tiles. Measured with libtpu's compile for v6e: 45k's
2048x2048 tile took 82.8 MiB of Mosaic scratch (20.7 bytes per element, past
the 96 MiB limit with its blocks; one wasted compile before this count), and
this count gives 22; its 1024x2048 tile compiles, and is kept. The row-wise
template's blocks count the same way: 12p's RMSNorm at 1024 rows of 8192 took
96.54 MiB, its 64.5 MiB of blocks plus the 32 MiB (4 bytes per element: the
f32 row, used after its sum of squares) counted here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .blocks import itemsize
from maxkernel_synthesis.ir import LAST_AXIS_REDUCTIONS, SHAPE_ONLY, Eqn

if TYPE_CHECKING:
    from maxkernel_synthesis.analysis import Analysis

#: Kinds whose value is a whole tile in the kernel (a group statistic is kept broadcast over its group).
TILE_KINDS = frozenset({"row", "grow", "gred"})
#: f32 tiles the grouped reduction works in at once: its input's copy, the two rotations and the partner (fitted
#: to the one measurement above: 45k's scratch less the tiles held across its reductions, 14.7 bytes, rounded up).
GROUP_REDUCE_TILES = 4


def temporaries_per_element(a: Analysis) -> int:
    """Bytes per tile element held in VMEM across the epilogue's reductions (0 for elementwise epilogues)."""
    eqns = a.program.eqns[a.program.eqns.index(a.dot) + 1:a.tail_from] if a.dot is not None else a.kernel_eqns
    alias = _aliases(eqns)
    last_use = _last_uses(eqns, alias, a.output)
    defined = {alias.get(a.dot.outputs[0], a.dot.outputs[0]): -1} if a.dot is not None else {}
    peak = 0
    for i, eqn in enumerate(eqns):
        if eqn.prim in LAST_AXIS_REDUCTIONS:
            held = sum(_bytes(a, name) for name, start in defined.items()
                       if start < i and last_use.get(name, -1) > i)
            working = 4 * GROUP_REDUCE_TILES if eqn.outputs[0] in a.group_reductions else 0
            peak = max(peak, held + working)
        if eqn.prim not in SHAPE_ONLY and a.kinds.get(eqn.outputs[0]) in TILE_KINDS:
            defined[eqn.outputs[0]] = i
    return peak


def _bytes(a: Analysis, name: str) -> int:
    return itemsize(a.program.dtypes[name]) if name in a.program.dtypes else 4


def _aliases(eqns: list[Eqn]) -> dict[str, str]:
    """Each shape-only op's output -> the value it is in the kernel (emit.py writes no line for it)."""
    alias: dict[str, str] = {}
    for eqn in eqns:
        if eqn.prim in SHAPE_ONLY and isinstance(eqn.inputs[0], str):
            alias[eqn.outputs[0]] = alias.get(eqn.inputs[0], eqn.inputs[0])
    return alias


def _last_uses(eqns: list[Eqn], alias: dict[str, str], output: str) -> dict[str, int]:
    last: dict[str, int] = {}
    for i, eqn in enumerate(eqns):
        for x in eqn.inputs:
            if isinstance(x, str):
                last[alias.get(x, x)] = i
    last[alias.get(output, output)] = len(eqns)
    return last
