"""A person's instructions to the offline planner (hitl), read as constraints on the template's block sizes.

The synthesizer has no language model, so it understands a small, stated
grammar and says so when an instruction is outside it, instead of silently
proposing the same plan:

* a size: "128 rows", "BLOCK_K=256", "block k 512", "bm 128" (the axis is set to that value);
* a direction: "smaller blocks", "use larger row blocks", "halve", "bigger tiles" (every block, or
  the named axis, moves that way from the plan the person saw).
"""

from __future__ import annotations

import re
from typing import Any

from attrs import frozen

#: words for an axis -> the template constants they may name (the first one the space has is used)
AXIS_WORDS = {"rows": ("BLOCK_ROWS", "BLOCK_M", "BLOCK_Q", "BLOCK_B"), "row": ("BLOCK_ROWS", "BLOCK_M", "BLOCK_Q", "BLOCK_B"),
              "m": ("BLOCK_M",), "n": ("BLOCK_N",), "k": ("BLOCK_K",), "q": ("BLOCK_Q",), "b": ("BLOCK_B",),
              "batch": ("BLOCK_B",), "columns": ("BLOCK_N", "BLOCK_K"), "cols": ("BLOCK_N", "BLOCK_K"),
              "column": ("BLOCK_N", "BLOCK_K")}
SIZE = re.compile(r"\b(\d+)\s*(rows?|columns?|cols)\b|\bblock[_ ]?(rows?|m|n|k|q|b)\s*(?:=|:|to|of)?\s*(\d+)"
                  r"|\bb(m|n|k|q)\s*(?:=|:)?\s*(\d+)", re.IGNORECASE)
SMALLER = re.compile(r"\b(smaller|shrink|halve|reduce|less|fewer)\b", re.IGNORECASE)
LARGER = re.compile(r"\b(larger|bigger|grow|double|increase|more)\b", re.IGNORECASE)
AXIS_NEAR = re.compile(r"\b(rows?|columns?|cols|batch|[mnkqb])[- ](?:blocks?|tiles?)\b", re.IGNORECASE)
GRAMMAR = ("the offline planner reads block sizes ('128 rows', 'BLOCK_K=256', 'smaller blocks', 'larger row "
           "blocks'); edit the plan (e) to set any parameter yourself")


@frozen
class Constraint:
    axis: str | None  # a template constant; None: every block constant
    op: str  # "=", "<" or ">"
    value: int | None = None

    def holds(self, point: dict[str, Any], seen: dict[str, Any], axes: list[str]) -> bool:
        keys = [self.axis] if self.axis else axes
        if self.op == "=":
            return point.get(self.axis) == self.value
        if self.op == "<":
            return all(point[k] <= seen[k] for k in keys) and any(point[k] < seen[k] for k in keys)
        return all(point[k] >= seen[k] for k in keys) and any(point[k] > seen[k] for k in keys)

    def text(self) -> str:
        axis = self.axis or "every block"
        return f"{axis} = {self.value}" if self.op == "=" else f"{axis} {'smaller' if self.op == '<' else 'larger'}"


def _axis(word: str, space: dict[str, list[int]]) -> str | None:
    return next((k for k in AXIS_WORDS.get(word.lower(), ()) if k in space), None)


def read(line: str, space: dict[str, list[int]]) -> tuple[list[Constraint], list[str]]:
    """The constraints in one instruction, and what in it could not be followed (with why)."""
    found, problems = [], []
    for m in SIZE.finditer(line):
        word = m.group(2) or m.group(3) or m.group(5)
        value = int(m.group(1) or m.group(4) or m.group(6))
        axis = _axis(word, space)
        if axis is None:
            problems.append(f"'{m.group(0)}': this template has no such block (its blocks: {', '.join(space)})")
        elif value not in space[axis]:
            problems.append(f"'{m.group(0)}': {axis} cannot be {value} here (its choices: {space[axis]})")
        else:
            found.append(Constraint(axis, "=", value))
    for pattern, op in ((SMALLER, "<"), (LARGER, ">")):
        if pattern.search(line) and not found:
            near = AXIS_NEAR.search(line)
            found.append(Constraint(_axis(near.group(1), space) if near else None, op))
    if not found and not problems:
        problems.append(f"'{line}': {GRAMMAR}")
    return found, problems


def follow(lines: list[str], ranked_points: list[dict[str, Any]], seen: dict[str, Any],
           space: dict[str, list[int]]) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """(the ranked points that follow every instruction, the constraints applied, what could not be followed).

    ``seen`` is the plan the person saw when they wrote the instructions: "smaller" is smaller than it."""
    axes = [k for k, v in space.items() if len(v) > 1 and k in seen]
    constraints, problems = [], []
    for line in lines:
        got, why = read(line, space)
        constraints += got
        problems += why
    points = [p for p in ranked_points if all(c.holds(p, seen, axes) for c in constraints)]
    return points, [c.text() for c in constraints], problems
