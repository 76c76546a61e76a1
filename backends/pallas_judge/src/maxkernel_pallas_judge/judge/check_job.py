"""The checker: judges the programs a tracer exported, in a sandbox that never imported the candidate.

For the full-size TPU program: the work accounting (``hlo_work``) and the
deviceless TPU compile for the target. For each check size: the work of its
TPU program, and the CPU interpret-mode program held against it (same
kernels with the same operand and result types, the same glue matmul work,
the same matmul work inside the kernels), then run on every input set of
that size. On a host with the chip, the device worker then runs and times the full-size program
(``device_job.py``); this process stays on the CPU.
A program the proof of kernel refuses (the parent makes the same call with the
same counts) stops here: no compile or run is spent on it.
Every fact here comes from the exported bytes: no candidate Python exists in
this process, so none can run.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Callable

import jax
import numpy as np
from jax import export

from . import proof
from .hlo_work import program_work
from .platform import Platform, load_platform

Emit = Callable[..., None]
#: The CPU program may spend this much more glue element-work than the TPU program it mirrors
#: (a few ops lower differently per platform, e.g. cumsum), plus a constant for index arithmetic.
GLUE_SLACK = 1.5
GLUE_SLACK_ELEMENTS = 1 << 16


def _load(blob: np.ndarray) -> export.Exported:
    return export.deserialize(bytearray(np.asarray(blob, dtype=np.uint8).tobytes()))


def _work(exported: export.Exported, platform: Platform) -> dict[str, Any]:
    return program_work(exported.mlir_module(), platform=platform)


def _signatures(work: dict[str, Any]) -> list[tuple]:
    return sorted((tuple(k["operands"]), tuple(k["results"])) for k in work["kernels"])


def mirrors(cpu: dict[str, Any], tpu: dict[str, Any], label: str = "TPU") -> str | None:
    """Why the CPU program is not the device program's twin (``tpu``: the device program's work, ``label``
    its chip family), or None when it is."""
    if _signatures(cpu) != _signatures(tpu):
        return (f"its kernels differ: {len(cpu['kernels'])} in the CPU program, {len(tpu['kernels'])} in the "
                f"{label} program, or their operand/result types differ")
    if abs(cpu["glue_flops"] - tpu["glue_flops"]) > 0.01 * max(tpu["glue_flops"], 1):
        return f"its matmul work outside kernels differs ({cpu['glue_flops']:.3g} vs {tpu['glue_flops']:.3g} FLOPs)"
    if cpu["glue_elementwise"] > GLUE_SLACK * tpu["glue_elementwise"] + GLUE_SLACK_ELEMENTS:
        return (f"its element work outside kernels differs ({cpu['glue_elementwise']:.3g} vs "
                f"{tpu['glue_elementwise']:.3g})")
    low, high = sorted((cpu["kernel_flops"], tpu["kernel_flops"]))
    counted = all(k.get("counted", True) for k in tpu["kernels"])  # a Mosaic GPU kernel's FLOPs are not read
    if counted and high and low < 0.5 * high:
        return f"its matmul work inside kernels differs ({cpu['kernel_flops']:.3g} vs {tpu['kernel_flops']:.3g} FLOPs)"
    return None


def run_check(job: dict[str, Any], arrays: list[np.ndarray], emit: Emit, stage: Callable[[str], None]) -> None:
    n_blobs = job["n_blobs"]
    blobs, inputs = arrays[:n_blobs], arrays[n_blobs:]
    layout = job["programs"]  # per size: {"device": blob index, "cpu": blob index or None}
    platform = load_platform(job["platform"])
    stage("work accounting")
    full = _load(blobs[layout[0]["device"]])
    work = _work(full, platform)
    emit({"type": "work", "size": 0, "work": work})
    if not proof.verdict(work, job["reference_work"][0])[0]:
        return  # refused whatever compiles: the parent says why, and no compile is spent on it
    stage("compile")
    emit({"type": "check", "name": "compile", **platform.compile_exported(full, job["target"])})
    # the full-size program as this process read it, written anew: what the chip runs is what was proven here
    emit({"type": "canonical", "size": 0}, [np.frombuffer(bytes(full.serialize()), dtype=np.uint8)])
    runners = {}
    for size, where in enumerate(layout[1:], start=1):
        stage(f"cross-check, size {size}")
        device_work = _work(_load(blobs[where["device"]]), platform)
        cpu_program = _load(blobs[where["cpu"]])
        why = mirrors(_work(cpu_program, platform), device_work, platform.label)
        emit({"type": "work", "size": size, "work": device_work, "mirror": why})
        if why or not proof.verdict(device_work, job["reference_work"][size])[0]:
            return
        runners[size] = jax.jit(cpu_program.call)
    _correctness(job["sets"], inputs, runners, emit, stage)


def _correctness(sets, inputs, runners, emit: Emit, stage: Callable[[str], None]) -> None:
    at = 0
    for index, spec in enumerate(sets):
        dyn = inputs[at:at + spec["n_inputs"]]
        at += spec["n_inputs"]
        stage(f"correctness, set {index}")
        try:
            outputs = [np.asarray(x) for x in jax.tree_util.tree_leaves(runners[spec["size"]](*dyn))]
        except Exception as exc:
            emit({"type": "outputs", "index": index, "error": {"type": type(exc).__name__, "message": str(exc)[:1500],
                                                               "line": None}})
            return
        emit({"type": "outputs", "index": index}, outputs)
