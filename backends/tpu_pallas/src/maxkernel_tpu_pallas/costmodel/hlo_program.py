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

from .hlo_fusion import fused_work, read_bytes, standalone_bytes, written_bytes
from .hlo_text import Computation, Instr, parse_module

#: Ops that cost nothing at run time (aliases, tuples, constants, bookkeeping).
FREE = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all", "partition-id",
                  "replica-id", "copy-done", "opt-barrier", "add-dependency", "domain", "iota"})
#: A loop whose trip count cannot be read from the program is charged this many trips (said in the notes).
UNKNOWN_TRIPS = 1


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
            read = sum(read_bytes(called, i, o.hbm_bytes(), self.comps) for i, o in enumerate(operands))
            work = fused_work(called, self.comps)
            return {**base, "kind": instr.attr("kind") or "", **work,
                    "hbm_bytes": read + written_bytes(called, instr)}
        if instr.opcode == "custom-call" and "tpu_custom_call" in instr.attrs:
            if self.skip_kernels:
                return None
            return self._mosaic(instr, operands, base)
        work = fused_work(Computation("single", [instr]), self.comps, names)
        scalar = instr.elements <= 1 and all(o.elements <= 1 for o in operands)
        return {**base, **work, "scalar": scalar, "hbm_bytes": standalone_bytes(instr, operands)}

    def _mosaic(self, instr: Instr, operands: list[Instr], base: dict[str, Any]) -> dict[str, Any]:
        from .mosaic_body import describe_mosaic

        config = re.search(r"backend_config=(\{.*\})\s*$", instr.attrs)
        arrays = [*operands, instr]
        try:
            kernel = describe_mosaic(config[1])
            if kernel["dynamic_axes"]:
                trips = _covering_trips(kernel, instr.hbm_bytes())
                kernel = describe_mosaic(config[1], dynamic_extent=trips)
                self.notes.append(f"Mosaic kernel {instr.name}: its run-time grid axis charged {trips} trips, the "
                                  "fewest that write its whole output")
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


def _covering_trips(kernel: dict[str, Any], out_bytes: float) -> int:
    """Trips of a kernel's run-time-sized grid axis (XLA's own ragged-dot kernel: its work items, known only
    when it runs): the fewest at which its output window, written once per trip as the axis advances, covers
    the output once. A floor, as a candidate's run-time axis is charged the least honest work."""
    window = kernel["windows"][-1] if kernel["windows"] else {}
    per_trip = (window.get("bytes") or 0) * window.get("transfers", 1)  # with the axis at one trip
    return max(1, math.ceil(out_bytes / per_trip)) if per_trip else 1


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
