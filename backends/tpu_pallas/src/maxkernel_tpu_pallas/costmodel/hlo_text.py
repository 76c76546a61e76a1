"""Read XLA's compiled HLO text: computations, instructions, shapes, and the bytes each shape occupies in HBM.

``compiled.as_text()`` of a TPU program is the optimized module XLA will run:
fusions (each one kernel launch), copies, custom calls (Mosaic kernels, XLA's
own among them), while loops and conditionals. This module parses that text
into plain records; ``hlo_program.py`` turns them into work.
"""

from __future__ import annotations

import math
import re

from attrs import define, field

#: Bytes per element of HLO element types (a 4-bit type counts half a byte).
ITEMSIZE = {"pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
            "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "token": 0}
_ARRAY = re.compile(r"\b([a-z]+[0-9a-z]*)\[([\d,]*)\](\{[^}]*\})?")
_NAME = re.compile(r"(ROOT\s+)?%([\w.\-]+)\s*=\s*")
_HEADER = re.compile(r"^(ENTRY\s+)?%([\w.\-]+)\s*\(")


@define
class Array:
    dtype: str
    dims: list[int]
    on_chip: bool  # laid out in VMEM/SMEM (memory space S(n), n >= 1): its bytes never cross HBM

    @property
    def elements(self) -> int:
        return math.prod(self.dims) if self.dims else 1

    @property
    def nbytes(self) -> float:
        return self.elements * ITEMSIZE.get(self.dtype, 4)


@define
class Instr:
    name: str
    shape: list[Array]
    opcode: str
    operands: list[str]
    attrs: str
    root: bool = False
    call_args: str = ""  # what sits between the opcode's parentheses: parameter(N), constant(V)

    def hbm_bytes(self) -> float:
        return sum(a.nbytes for a in self.shape if not a.on_chip)

    @property
    def elements(self) -> int:
        return sum(a.elements for a in self.shape)

    def attr(self, key: str) -> str | None:
        found = re.search(rf"\b{re.escape(key)}=(%?[\w.\-]+|\{{[^}}]*\}})", self.attrs)
        return found[1] if found else None


@define
class Computation:
    name: str
    instrs: list[Instr] = field(factory=list)
    entry: bool = False

    def by_name(self) -> dict[str, Instr]:
        return {i.name: i for i in self.instrs}

    @property
    def root(self) -> Instr:
        return next((i for i in self.instrs if i.root), self.instrs[-1])

    def parameters(self) -> dict[int, Instr]:
        found = {}
        for i in self.instrs:
            if i.opcode == "parameter":
                index = re.match(r"\s*(\d+)", i.call_args)
                found[int(index[1]) if index else len(found)] = i
        return found


def parse_shape(text: str) -> list[Array]:
    arrays = []
    for dtype, dims, layout in _ARRAY.findall(text):
        if dtype not in ITEMSIZE:
            continue
        space = re.search(r"S\((\d+)\)", layout or "")
        arrays.append(Array(dtype, [int(d) for d in dims.split(",") if d], bool(space and int(space[1]) >= 1)))
    return arrays


def _balanced(text: str, start: int) -> int:
    """Index just past the parenthesis group that opens at ``text[start]``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def parse_instr(line: str) -> Instr | None:
    found = _NAME.match(line)
    if not found:
        return None
    rest = line[found.end():]
    if rest.startswith("("):
        end = _balanced(rest, 0)
        shape_text, rest = rest[:end], rest[end:].lstrip()
    else:
        shape_text, _, rest = rest.partition(" ")
    op = re.match(r"([\w\-]+)\(", rest)
    if not op:
        return None
    close = _balanced(rest, op.end() - 1)
    inner = rest[op.end():close - 1]
    return Instr(found[2], parse_shape(shape_text), op[1], re.findall(r"%([\w.\-]+)", inner),
                 rest[close:].lstrip(", "), root=bool(found[1]), call_args=inner)


def parse_module(text: str) -> tuple[dict[str, Computation], str]:
    """(computations by name, the entry computation's name)."""
    comps: dict[str, Computation] = {}
    entry, current = "", None
    for raw in text.splitlines():
        line = raw.strip()
        if current is None:
            header = _HEADER.match(line)
            if header and line.endswith("{"):
                current = Computation(header[2], entry=bool(header[1]))
                if header[1]:
                    entry = header[2]
            continue
        if line == "}":
            comps[current.name] = current
            current = None
            continue
        instr = parse_instr(line)
        if instr is not None:
            current.instrs.append(instr)
    if not entry:
        raise ValueError("no ENTRY computation in the HLO text")
    return comps, entry
