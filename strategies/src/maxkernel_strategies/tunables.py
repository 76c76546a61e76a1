"""The parameters a candidate declares tunable: module-level UPPER_CASE integer constants.

Implementers (the models through the prompt, the offline synthesizer by
construction) put block sizes and the like at the top of the module as such
constants; autotuning rewrites exactly those lines.
"""

from __future__ import annotations

import ast
import re

#: Constants that are not block sizes even though they look like them.
NOT_TUNED = frozenset({"VMEM_LIMIT_BYTES", "FULL_ROWS"})


def tunables(code: str) -> dict[str, int]:
    """``NAME = <int>`` at module level, NAME in upper case; empty when the module does not parse."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    found = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.isupper() and isinstance(node.value, ast.Constant)
                and type(node.value.value) is int and node.targets[0].id not in NOT_TUNED):
            found[node.targets[0].id] = node.value.value
    return found


def with_values(code: str, values: dict[str, int]) -> str:
    """The module with each named constant's assignment rewritten."""
    for name, value in values.items():
        code, count = re.subn(rf"^{name}\s*=\s*\d+", f"{name} = {value}", code, count=1, flags=re.M)
        if not count:
            raise KeyError(name)
    return code


def neighbour_points(current: dict[str, int], limit: int) -> list[tuple[str, dict[str, int]]]:
    """Move one constant at a time: double or halve it, or multiply or divide it by 4 (a longer stride
    reaches a far optimum in fewer steps); powers of two stay powers of two. At most ``limit`` moves."""
    moves = []
    for name, value in current.items():
        for label, new in (("double", value * 2), ("halve", value // 2), ("quadruple", value * 4),
                           ("quarter", value // 4)):
            if new >= 1 and new != value:
                moves.append((f"{label} {name}", {**current, name: new}))
    return moves[:limit]
