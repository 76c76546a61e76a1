"""What the attention template knows of a recognized attention: its operands, mask clauses and kernel lines.

At the bottom of the package's imports: the recognizer fills these records, the emitter and the flash
template read them.
"""

from __future__ import annotations

from typing import Any, Protocol

from attrs import define, field

from .symbols import Lit, Node, Op

#: A fill value at or below this (or -inf) masks a score out: exp(fill - max) is 0 in f32 for any row whose
#: kept scores are above it + 104. Not -1e9: a bf16 score pipeline rounds a -1e9 fill to -9.98e8 (2p's), which
#: then read as an ordinary score op, applied in every block and never skipped. The staged runtime's
#: MASK_FLOOR is the same floor.
NEG_THRESHOLD = -1e6


@define
class Operand:
    """One array the kernel reads or writes, as the kernel sees it."""

    role: str  # q | k | v | bias | out
    input: int  # position among the reference's arguments (-1 for the output)
    roles: list[tuple]  # per array axis: ("grid", g, part) | ("q",) | ("k",) | ("d",) | ("e",) | ("one",)
    dtype: str
    shape: tuple[int, ...]


@define
class Clause:
    """``a * q + b * k + c >= 0`` over the query and key positions."""

    a: int
    b: int
    c: int


@define
class AttentionSpec:
    operands: list[Operand]
    grid: list[tuple[int, int]]  # (q axis holding the grid axis, extent at full size)
    sq: int
    sk: int
    d: int
    e: int
    q_lines: list[str]
    k_lines: list[str]
    v_lines: list[str]
    score_lines: list[str]
    out_lines: list[str]
    dot1_dtype: str
    p_dtype: str
    dot2_dtype: str
    out_dtype: str
    clauses: list[Clause]
    skip: bool  # fully masked blocks may be skipped (and the k blocks clamped)
    constants: list[float]  # the numbers in the lines, in order ({c0}, {c1}, ...)
    features: list[str] = field(factory=list)
    n_score_ops: int = 0
    #: Python conditions on the block bounds q_lo, q_hi, k_lo, k_hi (with placeholders): some key visible,
    #: every key visible; and the first and last visible key of a query block (from q_lo, q_hi), or None
    visible: str = "True"
    full: str = "False"
    k_first: str | None = None
    k_last: str | None = None

    def operand(self, role: str) -> Operand:
        return next(o for o in self.operands if o.role == role)

    @property
    def biases(self) -> list[Operand]:
        return [o for o in self.operands if o.role == "bias"]


def _strip(node: Node) -> Node:
    while isinstance(node, Op) and node.prim == "convert_element_type":
        node = node.args[0]
    return node


def _is_neg(node: Node) -> bool:
    node = _strip(node)
    return isinstance(node, Lit) and "float" in node.dtype and float(node.value) <= NEG_THRESHOLD


class Leaves(Protocol):
    """What the layout and the emitter read of a recognized program: its variables' leaves and extents, the
    output and the inputs' values (the recognizer is one)."""

    out: Any
    input_vals: list

    def L(self, var) -> tuple: ...  # noqa: N802  (the leaves of a variable: short, as in the papers' notation)

    def ext(self, leaf: int) -> int: ...
