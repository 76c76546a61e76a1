"""The work inside one op of a compiled program: a fusion's matmuls, element-ops and the bytes it really moves.

``hlo_program.py`` walks a compiled module op by op; this module says what
one op does: the dots and convolutions of its fused computation (padded as the
MXU runs them: a convolution is one matmul per window tap that meets real
input, a shallow window one matmul over the folded window), its element-ops
and transcendentals, and the HBM bytes it reads and writes (an operand it only
slices is read as the slices, a buffer it updates in place moves the update).
"""

from __future__ import annotations

import math
import re
from typing import Any

from .hlo_text import Computation, Instr

TRANSCENDENTAL = frozenset({"exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic",
                            "sqrt", "rsqrt", "cbrt", "sine", "cosine", "tan", "atan2", "erf", "power", "erf-inv"})
ELEMENTWISE = frozenset({"add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "compare",
                         "select", "and", "or", "xor", "not", "negate", "abs", "sign", "convert", "clamp", "floor",
                         "ceil", "round-nearest-even", "round-nearest-afz", "is-finite", "shift-left",
                         "shift-right-logical", "shift-right-arithmetic", "popcnt", "reduce-precision"})
REDUCTIONS = frozenset({"reduce", "reduce-window", "select-and-scatter", "sort", "scatter"})
SLICES = frozenset({"slice", "dynamic-slice", "gather"})
#: A convolution whose whole window (taps x input features per group) fits one contraction pass of this depth
#: is costed as one matmul over the folded window rather than one shallow matmul per tap.
FOLD_WITHIN = 128


def _dims(text: str | None) -> list[int]:
    return [int(d) for d in re.findall(r"\d+", text or "")]


def _dot_record(instr: Instr, lhs: Instr, rhs: Instr) -> dict[str, Any]:
    lhs_dims = lhs.shape[0].dims if lhs.shape else []
    rhs_dims = rhs.shape[0].dims if rhs.shape else []
    lc, rc = _dims(instr.attr("lhs_contracting_dims")), _dims(instr.attr("rhs_contracting_dims"))
    lb = _dims(instr.attr("lhs_batch_dims"))
    k = math.prod(lhs_dims[d] for d in lc) if lc else 1
    batch = math.prod(lhs_dims[d] for d in lb) if lb else 1
    m = math.prod(lhs_dims) // max(k * batch, 1)
    n = math.prod(rhs_dims) // max(math.prod(rhs_dims[d] for d in rc) * batch if rc else batch, 1)
    return {"m": m, "n": n, "k": k, "batch": batch, "dtype": _dtype(lhs), "count": 1,
            "precision": instr.attr("operand_precision") or ""}


def _conv_taps(instr: Instr, lhs: Instr, labels: str) -> int:
    """Window taps of a convolution that meet real input at an output position: per spatial dimension, at most
    the window over the input dilation (XLA spells a batched matmul as a dilated window meeting one), and at most
    the input's own extent (a window over padding, XLA's spelling of a broadcast, meets one)."""
    window = re.search(r"window=\{([^}]*)\}", instr.attrs)
    text = window[1] if window else ""
    sizes = _dims(re.search(r"size=([\dx]+)", text)[1]) if "size=" in text else []
    dilate = _dims(re.search(r"lhs_dilate=([\dx]+)", text)[1]) if "lhs_dilate=" in text else [1] * len(sizes)
    lhs_labels = labels.split("_")[0]
    lhs_dims = lhs.shape[0].dims if lhs.shape else []
    spatial = {c: d for c, d in zip(lhs_labels, lhs_dims, strict=False) if c.isdigit()}
    taps = 1
    for i, (size, dil) in enumerate(zip(sizes, dilate, strict=False)):
        taps *= min(math.ceil(size / max(dil, 1)), spatial.get(str(i), size))
    return max(taps, 1)


def _conv_record(instr: Instr, lhs: Instr, rhs: Instr) -> dict[str, Any]:
    """A convolution as the MXU runs it: one (positions x in) @ (in x out) product per window tap that meets
    real input, or, for a shallow input (few features per group), the taps folded into one deeper contraction
    when that pads less (the cheaper of the two is what XLA's emitter does)."""
    labels = instr.attr("dim_labels") or ""
    rhs_labels = labels.split("_")[1].split("->")[0] if "_" in labels else ""
    rhs_dims = rhs.shape[0].dims if rhs.shape else []
    size = {c: d for c, d in zip(rhs_labels, rhs_dims, strict=False)}
    k, n = size.get("i", 1), size.get("o", 1)
    taps = _conv_taps(instr, lhs, labels)
    out = instr.shape[0].elements if instr.shape else 0
    record = {"m": out // max(n, 1), "n": n, "k": k, "batch": 1, "dtype": _dtype(lhs), "count": taps,
              "precision": instr.attr("operand_precision") or ""}
    if taps > 1 and k * taps <= FOLD_WITHIN:
        # A window whose taps all fit one contraction pass: one (positions x taps*in) product, not one per tap.
        record.update(k=k * taps, count=1)
    return record


def _dtype(instr: Instr) -> str:
    name = instr.shape[0].dtype if instr.shape else "f32"
    return {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "s8": "int8"}.get(name, name)


def fused_work(comp: Computation, comps: dict[str, Computation],
                names: dict[str, Instr] | None = None) -> dict[str, Any]:
    """The work inside a fused computation (``names``: where its operands are defined, for a lone op)."""
    work = {"dots": [], "elementwise": 0.0, "transcendental": 0.0}
    names = names if names is not None else comp.by_name()
    for instr in comp.instrs:
        op = instr.opcode
        called = instr.attr("calls")
        if op == "fusion" and called and called.lstrip("%") in comps:
            inner = fused_work(comps[called.lstrip("%")], comps)
            work["dots"] += inner["dots"]
            work["elementwise"] += inner["elementwise"]
            work["transcendental"] += inner["transcendental"]
        elif op in ("dot", "convolution") and len(instr.operands) >= 2:
            lhs, rhs = names.get(instr.operands[0]), names.get(instr.operands[1])
            if lhs is not None and rhs is not None:
                record = _dot_record if op == "dot" else _conv_record
                work["dots"].append(record(instr, lhs, rhs))
        elif op in TRANSCENDENTAL:
            work["transcendental"] += instr.elements
        elif op in ELEMENTWISE:
            work["elementwise"] += instr.elements
        elif op in REDUCTIONS:
            work["elementwise"] += sum(names[o].elements for o in instr.operands[: max(len(instr.operands) // 2, 1)]
                                       if o in names)
    return work


def read_bytes(comp: Computation, index: int, full: float, comps: dict[str, Computation], depth: int = 0) -> float:
    """Bytes a fusion reads of its ``index``-th operand: only the slices it takes when all it does is slice it
    (directly or in a fusion nested in it), nothing when it updates it in place, else all of it."""
    param = comp.parameters().get(index)
    if param is None or depth > 4:
        return full
    users = [i for i in comp.instrs if param.name in i.operands]
    if not users:
        return 0.0
    read = 0.0
    for user in users:
        if user.opcode in SLICES and user.operands[0] == param.name:
            read += sum(a.nbytes for a in user.shape)
        elif user.opcode == "dynamic-update-slice" and user.operands[0] == param.name:
            continue  # updated in place: only the update is written (counted with the output)
        elif user.opcode == "fusion" and (user.attr("calls") or "").lstrip("%") in comps:
            inner = comps[user.attr("calls").lstrip("%")]
            read += sum(read_bytes(inner, i, full, comps, depth + 1)
                        for i, o in enumerate(user.operands) if o == param.name)
        else:
            return full
    return min(full, read)


def written_bytes(comp: Computation, instr: Instr) -> float:
    root = comp.root
    names = comp.by_name()
    if root.opcode == "dynamic-update-slice" and len(root.operands) > 1 and root.operands[1] in names:
        return sum(a.nbytes for a in names[root.operands[1]].shape)
    return instr.hbm_bytes()


def standalone_bytes(instr: Instr, operands: list[Instr]) -> float:
    """HBM bytes of an op outside any fusion: an in-place update moves its update, a slice what it takes."""
    if instr.opcode in ("dynamic-update-slice", "scatter") and len(operands) > 1:
        update = operands[1] if instr.opcode == "dynamic-update-slice" else operands[-1]
        return 2.0 * update.hbm_bytes()
    if instr.opcode in SLICES:
        return 2.0 * instr.hbm_bytes()
    return sum(o.hbm_bytes() for o in operands) + instr.hbm_bytes()
