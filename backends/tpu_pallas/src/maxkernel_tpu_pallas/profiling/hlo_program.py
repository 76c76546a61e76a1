"""The ops of a compiled TPU program, each with its work: what the XLA side of the speed model costs.

XLA runs a compiled program as a sequence of ops: each fusion is one kernel
(it reads its operands from HBM and writes its result back, with its
elementwise math, reductions and matmuls inside), copies and transposes move
bytes, custom calls run Mosaic kernels, while loops repeat their body. This
module lists those ops with their HBM bytes, MXU work (dots and convolutions,
padded the way the MXU pads them), VPU element-ops and EUP transcendentals,
and how many times each runs (loop trip counts), as plain numbers for
``xla_model.py``. A reference and a candidate's glue are described by the
same rule, so their estimates are of the same kind.
"""

from __future__ import annotations

import math
import re
from typing import Any

from .hlo_text import Computation, Instr, parse_module

#: Ops that cost nothing at run time (aliases, tuples, constants, bookkeeping).
FREE = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all", "partition-id",
                  "replica-id", "copy-done", "opt-barrier", "add-dependency", "domain", "iota"})
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
#: A loop whose trip count cannot be read from the program is charged this many trips (said in the notes).
UNKNOWN_TRIPS = 1


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


def _fused_work(comp: Computation, comps: dict[str, Computation],
                names: dict[str, Instr] | None = None) -> dict[str, Any]:
    """The work inside a fused computation (``names``: where its operands are defined, for a lone op)."""
    work = {"dots": [], "elementwise": 0.0, "transcendental": 0.0}
    names = names if names is not None else comp.by_name()
    for instr in comp.instrs:
        op = instr.opcode
        called = instr.attr("calls")
        if op == "fusion" and called and called.lstrip("%") in comps:
            inner = _fused_work(comps[called.lstrip("%")], comps)
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


def _read_bytes(comp: Computation, index: int, full: float, comps: dict[str, Computation], depth: int = 0) -> float:
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
            read += sum(_read_bytes(inner, i, full, comps, depth + 1)
                        for i, o in enumerate(user.operands) if o == param.name)
        else:
            return full
    return min(full, read)


def _written_bytes(comp: Computation, instr: Instr) -> float:
    root = comp.root
    names = comp.by_name()
    if root.opcode == "dynamic-update-slice" and len(root.operands) > 1 and root.operands[1] in names:
        return sum(a.nbytes for a in names[root.operands[1]].shape)
    return instr.hbm_bytes()


class ProgramReader:
    """Walks a compiled module's entry computation (into loops, calls and conditionals) collecting ops."""

    def __init__(self, text: str, *, skip_kernels: bool = False, unknown_trips: int = UNKNOWN_TRIPS) -> None:
        self.comps, self.entry = parse_module(text)
        self.skip_kernels = skip_kernels
        self.unknown_trips = unknown_trips
        self.ops: list[dict[str, Any]] = []
        self.notes: list[str] = []

    def read(self) -> dict[str, Any]:
        self._walk(self.comps[self.entry], 1)
        return {"ops": self.ops, "notes": self.notes}

    def _walk(self, comp: Computation, trips: int) -> None:
        names = comp.by_name()
        for instr in comp.instrs:
            op = instr.opcode
            if op in FREE:
                continue
            if op == "while":
                body, cond = (instr.attr(k) for k in ("body", "condition"))
                n = self._trips(instr, names)
                for part in (body, cond):
                    if part and part.lstrip("%") in self.comps:
                        self._walk(self.comps[part.lstrip("%")], trips * n)
                continue
            if op in ("call", "conditional", "async-start"):
                self._walk_called(instr, trips)
                continue
            record = self._op(instr, names)
            if record is not None:
                self.ops.append({**record, "trips": trips})

    def _walk_called(self, instr: Instr, trips: int) -> None:
        targets = re.findall(r"%([\w.\-]+)", " ".join(filter(None, (instr.attr("to_apply"), instr.attr("calls"),
                                                                      instr.attr("branch_computations"),
                                                                      instr.attr("true_computation"),
                                                                      instr.attr("false_computation")))))
        comps = [self.comps[t] for t in targets if t in self.comps]
        if instr.opcode == "conditional" and comps:  # the dearest branch, by its bytes and FLOPs
            start = len(self.ops)
            costs = []
            for c in comps:
                before = len(self.ops)
                self._walk(c, trips)
                branch = self.ops[before:]
                costs.append((sum(o["hbm_bytes"] + sum(2 * d["m"] * d["n"] * d["k"] for d in o["dots"])
                                  for o in branch), branch))
                del self.ops[before:]
            self.ops[start:] = max(costs, key=lambda c: c[0])[1]
            return
        for c in comps:
            self._walk(c, trips)

    def _trips(self, instr: Instr, names: dict[str, Instr]) -> int:
        known = re.search(r'"known_trip_count":\{"n":"(\d+)"', instr.attrs)
        if known:
            return int(known[1])
        counted = self._counted_trips(instr, names)
        if counted is not None:
            return counted
        self.notes.append(f"loop {instr.name}: trip count not readable from the program; charged {self.unknown_trips}")
        return self.unknown_trips

    def _counted_trips(self, instr: Instr, names: dict[str, Instr]) -> int | None:
        """A counted loop: the condition compares a tuple element with a constant, the body steps it by a constant,
        and the loop starts it at a constant."""
        cond = self.comps.get((instr.attr("condition") or "").lstrip("%"))
        body = self.comps.get((instr.attr("body") or "").lstrip("%"))
        if cond is None or body is None or cond.root.opcode != "compare":
            return None
        cnames = cond.by_name()
        sides = [cnames.get(o) for o in cond.root.operands]
        if len(sides) != 2 or None in sides:
            return None
        gte = next((s for s in sides if s.opcode == "get-tuple-element"), None)
        bound = next((s for s in sides if s.opcode == "constant"), None)
        if gte is None or bound is None:
            return None
        index = int(re.search(r"index=(\d+)", gte.attrs)[1])
        init = self._constant_in_tuple(names.get(instr.operands[0]) if instr.operands else None, names, index)
        step = self._step(body, index)
        limit = _int_constant(bound, cnames)
        if None in (init, step, limit) or step == 0:
            return None
        direction = re.search(r"direction=(\w+)", cond.root.attrs)
        inclusive = direction and direction[1] in ("LE", "GE")
        return max(0, math.ceil((limit - init + (1 if inclusive else 0)) / step))

    def _constant_in_tuple(self, tup: Instr | None, names: dict[str, Instr], index: int) -> int | None:
        if tup is None or tup.opcode != "tuple" or index >= len(tup.operands):
            return None
        return _int_constant(names.get(tup.operands[index]), names)

    def _step(self, body: Computation, index: int) -> int | None:
        root, names = body.root, body.by_name()
        if root.opcode != "tuple" or index >= len(root.operands):
            return None
        update = names.get(root.operands[index])
        if update is None or update.opcode != "add":
            return None
        for o in update.operands:
            value = _int_constant(names.get(o), names)
            if value is not None:
                return value
        return None

    def _op(self, instr: Instr, names: dict[str, Instr]) -> dict[str, Any] | None:
        label = re.search(r'op_name="([^"]*)"', instr.attrs)
        base = {"name": instr.name, "opcode": instr.opcode, "label": label[1][-80:] if label else "",
                "dots": [], "elementwise": 0.0, "transcendental": 0.0, "steps": 1, "kernel": False}
        operands = [names[o] for o in instr.operands if o in names]
        if instr.opcode == "fusion":
            called = self.comps.get((instr.attr("calls") or "").lstrip("%"))
            if called is None:
                return {**base, "hbm_bytes": sum(o.hbm_bytes() for o in operands) + instr.hbm_bytes()}
            read = sum(_read_bytes(called, i, o.hbm_bytes(), self.comps) for i, o in enumerate(operands))
            work = _fused_work(called, self.comps)
            return {**base, "kind": instr.attr("kind") or "", **work,
                    "hbm_bytes": read + _written_bytes(called, instr)}
        if instr.opcode == "custom-call" and "tpu_custom_call" in instr.attrs:
            if self.skip_kernels:
                return None
            return self._mosaic(instr, operands, base)
        work = _fused_work(Computation("single", [instr]), self.comps, names)
        scalar = instr.elements <= 1 and all(o.elements <= 1 for o in operands)
        return {**base, **work, "scalar": scalar, "hbm_bytes": _standalone_bytes(instr, operands)}

    def _mosaic(self, instr: Instr, operands: list[Instr], base: dict[str, Any]) -> dict[str, Any]:
        from .mosaic_body import describe_mosaic

        config = re.search(r"backend_config=(\{.*\})\s*$", instr.attrs)
        arrays = [*operands, instr]
        try:
            kernel = describe_mosaic(config[1])
        except Exception as exc:  # noqa: BLE001 - an unreadable kernel is charged its I/O once
            self.notes.append(f"Mosaic kernel {instr.name} not read ({type(exc).__name__}): charged its I/O once")
            return {**base, "kernel": True, "hbm_bytes": sum(a.hbm_bytes() for a in arrays)}
        traffic = 0.0
        for i, window in enumerate(kernel["windows"]):
            whole = arrays[i].hbm_bytes() if i < len(arrays) else 0.0
            traffic += whole if window["bytes"] is None else window["bytes"] * window["transfers"]
        work = kernel["body"]
        steps = kernel["steps"]
        return {**base, "kernel": True, "steps": steps, "hbm_bytes": traffic,
                "dots": [{**d, "count": d["count"] * steps} for d in work["dots"]],
                "elementwise": work["elementwise"] * steps, "transcendental": work["transcendental"] * steps}


def _standalone_bytes(instr: Instr, operands: list[Instr]) -> float:
    """HBM bytes of an op outside any fusion: an in-place update moves its update, a slice what it takes."""
    if instr.opcode in ("dynamic-update-slice", "scatter") and len(operands) > 1:
        update = operands[1] if instr.opcode == "dynamic-update-slice" else operands[-1]
        return 2.0 * update.hbm_bytes()
    if instr.opcode in SLICES:
        return 2.0 * instr.hbm_bytes()
    return sum(o.hbm_bytes() for o in operands) + instr.hbm_bytes()


def _int_constant(instr: Instr | None, names: dict[str, Instr] | None = None) -> int | None:
    """The integer an instruction holds, through copies and bitcasts of a constant."""
    for _ in range(8):
        if instr is None or instr.opcode not in ("copy", "bitcast", "convert", "reshape") or not names:
            break
        instr = names.get(instr.operands[0]) if instr.operands else None
    if instr is None or instr.opcode != "constant":
        return None
    found = re.fullmatch(r"\s*(-?\d+)\s*", instr.call_args)
    return int(found[1]) if found else None


def describe_program(text: str, *, skip_kernels: bool = False, unknown_trips: int = UNKNOWN_TRIPS) -> dict[str, Any]:
    """The ops of a compiled module (``compiled.as_text()``) with their work; ``skip_kernels`` leaves the Mosaic
    custom calls out (a candidate's own kernels are modelled from its trace instead); a loop whose trip count
    the program does not show is charged ``unknown_trips``."""
    return ProgramReader(text, skip_kernels=skip_kernels, unknown_trips=unknown_trips).read()
