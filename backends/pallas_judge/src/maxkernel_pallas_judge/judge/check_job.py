"""The checker: judges the programs a tracer traced, in a sandbox that never imported the candidate.

It reads each traced jaxpr back with the judge's own classes (``jaxpr_wire``: a primitive or object jax does
not define cannot cross), refuses traces that are not one program (``same_program``), and makes every program
it judges itself, from those jaxprs: the device program (lowered and exported here for the target: the work
accounting of ``hlo_work``, the deviceless compile, and on a host with the chip the program the device worker
runs) and the CPU program (the same jaxpr with its kernels in Pallas' interpreter, run here on every input set
of its size). The kernel description the cost model estimates from is made here too. No lowering rule,
exporter or interpreter the candidate could have touched runs: they live in this process, which never held its
code. A program the proof of kernel refuses (the parent makes the same call with the same counts) stops here:
no compile or run is spent on it.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Callable

import jax
import numpy as np
from jax import export

from . import jaxpr_wire, memory, proof, same_program
from .errors import trim_error
from .hlo_work import program_work
from .job_records import CheckJob
from .platform import Platform, load_platform
from .program import interpreted
from .work import work_stats

Emit = Callable[..., None]
#: set when a job leaves this process unfit for another (a failed TPU-semantics run whose callbacks may still
#: be running): the worker exits after reporting it
RETIRE = False


def _read(job: CheckJob, blobs: list[np.ndarray]) -> tuple[dict[int, Any], Any]:
    """(the program per size, the second full-size trace), read with the judge's own classes."""
    programs, again = {}, None
    for slot, blob in zip(job.programs, blobs, strict=True):
        closed = jaxpr_wire.loads(np.asarray(blob, dtype=np.uint8).tobytes())
        if slot.again:
            again = closed
        else:
            programs[slot.size] = closed
    return programs, again


def _not_the_tasks_inputs(programs: dict[int, Any], input_shapes: list[list[dict[str, Any]]]) -> str | None:
    """Why a program is not one of the task's at its size: it takes other inputs than the task's there (a
    check-size program sent as the full size's), or None."""
    for size, shapes in enumerate(input_shapes):
        if size not in programs:
            continue
        want = [(tuple(s["shape"]), str(s["dtype"])) for s in shapes]
        got = [(tuple(a.shape), str(a.dtype)) for a in programs[size].in_avals]
        if got != want:
            at = "the full size" if size == 0 else f"check size {size}"
            return (f"the program sent for {at} takes inputs {got[:4]}, where the task's at that size are "
                    f"{want[:4]}: it is not the program computation() traces there")
    return None


def _export(closed, size: int, job: CheckJob, platform: Platform, emit: Emit) -> export.Exported | None:
    """The device program of one traced program, lowered here; None when the compiler refused it (said)."""
    try:
        return export.deserialize(bytearray(platform.export(closed, job.target)))
    except Exception as exc:  # Mosaic or Triton refused the kernel while lowering: the compiler's verdict
        emit({"type": "check", "name": "compile", "ok": False, "size": size, "seconds": 0.0,
              "error": trim_error(exc, "candidate.py")})
        return None


def run_check(job: CheckJob, arrays: list[np.ndarray], emit: Emit, stage: Callable[[str], None]) -> None:
    n_blobs = len(job.programs)
    blobs, inputs = arrays[:n_blobs], arrays[n_blobs:]
    platform = load_platform(job.platform)
    stage("read the programs")
    try:
        programs, again = _read(job, blobs)
        why = _not_the_tasks_inputs(programs, job.input_shapes) or same_program.refusal(
            programs[0], again, {k: v for k, v in programs.items() if k})
    except jaxpr_wire.WireError as exc:
        why = str(exc)
    if why:
        emit({"type": "refused", "why": why})
        return
    emit({"type": "traced_work", "work": work_stats(programs[0])})
    _describe(programs[0], job.target, platform, emit)
    stage("export")
    full = _export(programs[0], 0, job, platform, emit)
    if full is None:
        return
    stage("work accounting")
    work = program_work(full.mlir_module(), platform=platform)
    emit({"type": "work", "size": 0, "work": work})
    if not proof.verdict(work, job.reference_work[0])[0]:
        return  # refused whatever compiles: the parent says why, and no compile is spent on it
    stage("compile")
    emit({"type": "check", "name": "compile", **platform.compile_exported(full, job.target)})
    # the full-size program as this process made it: what the chip runs is what was proven here
    emit({"type": "canonical", "size": 0}, [np.frombuffer(bytes(full.serialize()), dtype=np.uint8)])
    runners = {}
    for size in sorted(k for k in programs if k):
        stage(f"check size {size}")
        device = _export(programs[size], size, job, platform, emit)
        if device is None:
            return
        device_work = program_work(device.mlir_module(), platform=platform)
        emit({"type": "work", "size": size, "work": device_work})
        if not proof.verdict(device_work, job.reference_work[size])[0]:
            return
        runners[size] = interpreted(programs[size])
    memory.install()
    semantics = platform.semantic_interpreter()
    chip = None  # the first set of the first size: its kernels also under the chip's semantics, one by one
    if runners and semantics is not None:
        chip = (min(runners), programs[min(runners)], semantics, job.atol, job.rtol)
    _correctness(job.sets, inputs, runners, chip, emit, stage)


def _describe(closed, target: str, platform: Platform, emit: Emit) -> None:
    """The kernels' grid, blocks and work for the cost model, from the program read here (an estimate must
    never break a verdict)."""
    try:
        emit({"type": "kernels", "kernels": platform.describe_kernels(closed), "chip": platform.chip(target)})
    except Exception as exc:
        emit({"type": "kernels", "error": f"{type(exc).__name__}: {exc}"[:500]})


def _correctness(sets, inputs, runners, chip, emit: Emit, stage: Callable[[str], None]) -> None:
    """Every input set through its size's CPU program; on the first set of ``chip``'s size, its kernels also
    held to the chip's semantics (``semantics.first_difference``; ``chip``: that size, its program, the
    semantic interpreter and the task's tolerances, or None)."""
    at = 0
    for index, spec in enumerate(sets):
        dyn = inputs[at:at + spec.n_inputs]
        at += spec.n_inputs
        stage(f"correctness, set {index}")
        try:
            outputs = [np.asarray(x) for x in jax.tree_util.tree_leaves(runners[spec.size](*dyn))]
        except Exception as exc:
            emit({"type": "outputs", "index": index, "error": {"type": type(exc).__name__, "message": str(exc)[:1500],
                                                               "line": None}})
            return
        if chip is not None and chip[0] == spec.size:
            stage(f"correctness, set {index}: kernels under the chip's semantics")
            why = _semantic_difference(chip, dyn)
            chip = None
            if why:
                emit({"type": "outputs", "index": index, "error": {"type": "ChipSemantics", "message": why[:1500],
                                                                   "line": None}})
                return
        emit({"type": "outputs", "index": index}, outputs)


def _semantic_difference(chip, dyn) -> str | None:
    from .semantics import first_difference

    _, closed, semantics, atol, rtol = chip
    try:
        why = first_difference(closed, dyn, semantics, atol, rtol, _reset_semantics)
    except Exception as exc:
        why = f"the program fails under the TPU's semantics: {type(exc).__name__}: {str(exc)[-800:]}"
    if why:  # a failed semantic run's callbacks may still run on XLA's threads: this process is not reused
        _retire()
    _reset_semantics()
    return why


def _retire() -> None:
    global RETIRE
    RETIRE = True


def _reset_semantics() -> None:
    """The TPU-semantics interpreter keeps process-wide state (blocks visited per kernel, buffers, DMAs) that one
    program's run, or its failure, leaves behind: a kept checker clears it around each run."""
    from jax.experimental.pallas import tpu as pltpu

    pltpu.reset_tpu_interpret_mode_state()
