"""The generic parameter search: moves through a declared space, or through block-size-like constants.

A candidate's author may declare its parameter space (``Candidate.space``); the
strategies move one declared parameter at a time through its legal values. A
candidate without one (a model's module) is searched through its block-size-like
constants: module-level ``NAME = <int>`` lines, NAME in upper case, whose value
is a power of two from 8 to 65536 (byte limits and flags are not block sizes).
Either way a move rewrites exactly those lines of the module.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from maxkernel_core import Move, ParameterSpace, pyast

#: Values a constant must lie between to be taken for a block size when nothing is declared.
BLOCK_LIKE = (8, 1 << 16)
#: One move's steps through an ordered list of legal values, and what each is called.
STEPS = ((1, "double"), (-1, "halve"), (2, "quadruple"), (-2, "quarter"))


def tunables(code: str) -> dict[str, int]:
    """Block-size-like ``NAME = <int>`` lines at module level; empty when the module does not parse."""
    try:
        tree = pyast.parse(code)
    except SyntaxError:
        return {}
    found = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.isupper() and isinstance(node.value, ast.Constant)
                and type(node.value.value) is int and _block_like(node.value.value)):
            found[node.targets[0].id] = node.value.value
    return found


def _block_like(value: int) -> bool:
    return BLOCK_LIKE[0] <= value <= BLOCK_LIKE[1] and value & (value - 1) == 0


def with_values(code: str, values: dict[str, Any]) -> str:
    """The module with each named constant's assignment rewritten."""
    for name, value in values.items():
        code, count = re.subn(rf"^{name}\s*=\s*\d+", f"{name} = {value}", code, count=1, flags=re.M)
        if not count:
            raise KeyError(name)
    return code


def declared_moves(space: ParameterSpace, point: dict[str, Any]) -> list[Move]:
    """Moves of one declared parameter to a neighbouring legal value (a longer stride, x4 or /4, reaches a
    far optimum in fewer steps)."""
    moves = []
    for parameter in space.parameters:
        values = parameter.values
        if len(values) < 2 or parameter.name not in point:
            continue
        i = values.index(point[parameter.name]) if point[parameter.name] in values else 0
        for step, label in STEPS:
            if 0 <= i + step < len(values):
                moves.append(Move(f"{label} {parameter.name}", {**point, parameter.name: values[i + step]}))
    return moves


def constant_moves(current: dict[str, int]) -> list[Move]:
    """Moves of one undeclared constant: doubled or halved, multiplied or divided by 4 (powers of two stay so)."""
    moves = []
    for name, value in current.items():
        for step, label in STEPS:
            new = value * 2 ** step if step > 0 else value // 2 ** -step
            if new >= 1 and new != value:
                moves.append(Move(f"{label} {name}", {**current, name: new}))
    return moves
