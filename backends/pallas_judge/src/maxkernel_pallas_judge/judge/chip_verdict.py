"""The verdict's last step on a host with the chip, made here in the parent from what the device worker sent
back (``device_job.py`` ran the candidate's full-size program beside XLA's reference on the same inputs).

Correctness is judged here, on the outputs themselves: the device worker runs programs and decides nothing.
The speed is a measurement only: the candidate's device time and XLA's, from profiler traces taken the same
way in the same process, with what they achieve against the chip's peaks. An estimate never stands in for it
on such a host; a kernel verified but not timed carries no speed; a time below what the chip can physically do
for the task's work means the work was not done.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from attrs import asdict, evolve
from maxkernel_core import Achieved, CheckResult, EvalStatus, Evaluation, Profile, TestReport

from ..sandbox.records import JobOutcome
from . import device_messages
from .compare import compare, distance
from .device_messages import ChipOutputs, Timed
from .traces import keep_trace

#: A kernel measured above this share of the chip's roofline for the task's work, where XLA's reference is not,
#: did not do the work (or the timing is broken): refused.
IMPOSSIBLE_ROOFLINE = 1.5
OUT_OF_MEMORY = ("RESOURCE_EXHAUSTED", "Out of memory", "out of memory")


def judge_outputs(got: list[np.ndarray], xla: list[np.ndarray], exact: list[np.ndarray] | None, atol, rtol,
                  no_arbiter: str = "") -> dict[str, Any]:
    """Whether a kernel's full-size outputs on the chip are right, and who is wrong where it and XLA disagree.

    Right: within the task's tolerance of XLA's outputs; or, where it is not, within it of the highest-precision
    reference, or no farther from that reference than XLA's own outputs are (by the largest error and by how
    many values are outside the tolerance: XLA's default precision is then the less accurate side). Wrong
    otherwise, and always when the outputs' count, shapes or dtypes are not XLA's, or when they differ from
    XLA's and there is no highest-precision reference to ask (``exact`` None: ``no_arbiter`` says why)."""
    ok, why, _ = compare(xla, got, atol, rtol)
    if ok:
        return {"ok": True, "against": "xla"}
    if exact is None:
        return {"ok": False, "farther": "kernel", "xla_disagreement": why, "no_arbiter": no_arbiter}
    kernel, ref = distance(exact, got, atol, rtol), distance(exact, xla, atol, rtol)
    base = {"xla_disagreement": why, "kernel_vs_exact": kernel, "xla_vs_exact": ref}
    if kernel["mismatched"] < 0:
        return {"ok": False, "farther": "kernel", **base}
    no_worse = kernel["mismatched"] <= max(ref["mismatched"], 0) and kernel["max_abs_error"] <= ref["max_abs_error"]
    if kernel["mismatched"] == 0 or no_worse:
        return {"ok": True, "against": "exact", "farther": "xla", **base}
    return {"ok": False, "farther": "kernel", **base}


def wrong_reason(judged: dict[str, Any], chip: str, which: str) -> str:
    """Why the full-size program is wrong on the chip, naming who is farther from the high-precision reference."""
    if "no_arbiter" in judged:
        return (f"wrong on the {chip} at full size ({which}): against XLA's reference there, "
                f"{judged['xla_disagreement']}; no highest-precision reference could side with the kernel "
                f"({judged['no_arbiter']})")
    kernel, xla = judged["kernel_vs_exact"], judged["xla_vs_exact"]
    if kernel["mismatched"] < 0:
        return f"wrong on the {chip} at full size ({which}): {judged['xla_disagreement']}"
    return (f"wrong on the {chip} at full size ({which}): against XLA's reference there, "
            f"{judged['xla_disagreement']}; against the highest-precision reference the kernel is off by "
            f"{kernel['max_abs_error']:.3g} ({kernel['mismatched']} values outside the tolerance), XLA's own output "
            f"by {xla['max_abs_error']:.3g} ({xla['mismatched']}): the kernel is the farther")


def right_line(judged: list[dict[str, Any]], chip: str) -> str:
    sets = f"{len(judged)} full-size input set{'s' if len(judged) > 1 else ''}"
    moved = [j for j in judged if j.get("against") == "exact"]
    if not moved:
        return f"the outputs on {sets} match XLA's reference on the {chip}"
    k, x = moved[0]["kernel_vs_exact"], moved[0]["xla_vs_exact"]
    return (f"the outputs on {sets} match XLA's reference on the {chip} or, where they differ, the "
            f"highest-precision reference sides with the kernel (off by {k['max_abs_error']:.3g}, XLA's "
            f"default-precision output by {x['max_abs_error']:.3g})")


def achieved(flops: float | None, hbm_bytes: float | None, seconds: float, chip: dict[str, Any]) -> Achieved:
    """TFLOP/s a time achieves for the task's work, the HBM GB/s of at least its inputs and outputs once, and
    the share of the chip's roofline (its floor, every FLOP at peak and every byte once, over the time): above
    1 means the time is shorter than the chip allows for that work."""
    peak_flops, peak_bw = chip.get("bf16_ops_per_second"), chip.get("mem_bw_bytes_per_second")
    floors = [work / peak for work, peak in ((flops, peak_flops), (hbm_bytes, peak_bw)) if work and peak]
    return Achieved(flops / seconds / 1e12 if flops else None, hbm_bytes / seconds / 1e9 if hbm_bytes else None,
                    max(floors) / seconds if floors else None)


def task_work(ref) -> tuple[float | None, float | None]:
    """(the task's FLOPs, the bytes its inputs and outputs take in HBM): the same work for a kernel and XLA."""
    flops = ref.flops or (ref.work or {}).get("glue_flops") or None
    memory = (ref.xla or {}).get("memory") or {}
    hbm = (memory.get("argument_size_in_bytes") or 0) + (memory.get("output_size_in_bytes") or 0)
    return flops, hbm or None


def _chip_outputs(verdict, sent: tuple[ChipOutputs, list], chip, kind: str) -> tuple[list[dict], str | None, bool]:
    """(each set's judgement, why the program failed, whether that failure is the machine's), from the
    device worker's ``chip_outputs`` message."""
    header, arrays = sent
    if header.error is not None:
        why = f"the full-size program failed on the {kind}: {header.error.type}: {header.error.message}"
        return [], why, any(marker in why for marker in OUT_OF_MEMORY)
    n, sets = header.n_outputs, header.sets
    got = [list(arrays[i * n:(i + 1) * n]) for i in range(sets)]
    refs = [(chip.xla_outputs, chip.exact_outputs)]
    if sets > 1:
        beside, r = arrays[sets * n:], header.n_reference
        refs.append((list(beside[:r]), list(beside[r:2 * r]) if header.exact else None))
    atol, rtol = verdict.task.atol, verdict.task.rtol
    no_arbiter = chip.no_arbiter or f"the highest-precision reference did not run on the fresh set on the {kind}"
    return [judge_outputs(g, xla, exact, atol, rtol, no_arbiter)
            for g, (xla, exact) in zip(got, refs, strict=True)], None, False


def judge_on_chip(verdict, checked: JobOutcome, chip, message: str, report: TestReport) -> Evaluation:
    """The verdict from the device worker's report: incorrect on the chip, or ok with a measured speed."""
    verdict.details["device_sandbox"] = checked.sandbox
    try:
        sent, timed = device_messages.last(checked, "chip_outputs"), device_messages.last(checked, "timing")
    except ValueError as exc:
        return verdict.done(EvalStatus.CRASHED, str(exc))
    if chip is None or sent is None:
        return verdict.ended_badly(checked, "device worker") or verdict.done(
            EvalStatus.CRASHED, f"the device worker reported no result for the full-size program: "
                                f"{(checked.log_tail or checked.how_it_ended)[-300:]}")
    kind = f"{chip.device_kind} ({verdict.target})"
    judged, failed, machine = _chip_outputs(verdict, sent, chip, kind)
    verdict.details["chip_correctness"] = judged or failed
    if failed:
        verdict.checks.append(CheckResult("chip_correctness", False, failed))
        status = EvalStatus.CRASHED if machine else EvalStatus.INCORRECT
        return verdict.done(status, failed, test=evolve(report, passed=False, message=failed))
    for which, one in zip(("the task's inputs", "a fresh input set"), judged, strict=False):
        if not one["ok"]:
            why = wrong_reason(one, kind, which)
            verdict.checks.append(CheckResult("chip_correctness", False, why, {"sets": judged}))
            return verdict.done(EvalStatus.INCORRECT, why, test=evolve(report, passed=False, message=why))
    verdict.checks.append(CheckResult("chip_correctness", True, right_line(judged, kind), {"sets": judged}))
    return _timed(verdict, checked, timed, chip, kind, f"{message}; {right_line(judged, kind)}", report)


def _timed(verdict, checked: JobOutcome, timed: tuple[Timed, list] | None, chip, kind: str, message: str,
           report: TestReport) -> Evaluation:
    if timed is None or not timed[0].ok:
        bad = verdict.ended_badly(checked, "device worker")
        why = timed[0].error.message if timed and timed[0].error else (bad.reason if bad else "no timing reported")
        verdict.checks.append(CheckResult("timing", False, why))
        verdict.details["timing"] = f"not measured: timing on the {kind} failed: {why}"
        return verdict.done(EvalStatus.OK, message, test=report)  # verified, unmeasured: no speed is claimed
    header, trace = timed
    if header.calls_differ:
        why = (f"{header.calls_differ} of {header.calls_checked} timed calls on the {kind} returned outputs "
               "other than the program's first call on the same inputs: it reads memory it never wrote, or keeps "
               "state across calls")
        verdict.checks.append(CheckResult("timing", False, why))
        return verdict.done(EvalStatus.INCORRECT, why, test=evolve(report, passed=False, message=why))
    profile, xla = measured_profile(verdict, header, trace, chip, kind)
    fraction, xla_fraction = profile.roofline_fraction or 0.0, xla.roofline_fraction or 0.0
    if fraction > IMPOSSIBLE_ROOFLINE and xla_fraction <= 1.0:
        why = (f"measured at {fraction:.0%} of the {kind}'s roofline for the task's work (XLA's reference at "
               f"{xla_fraction:.0%}): faster than the chip can do that work, so the work was not done")
        verdict.checks.append(CheckResult("timing", False, why))
        return verdict.done(EvalStatus.REJECTED, why, test=report)
    return verdict.done(EvalStatus.OK, message, test=report, profile=profile)


def measured_profile(verdict, header: Timed, trace, chip, kind: str) -> tuple[Profile, Achieved]:
    """The candidate's measured speed against XLA's, measured the same way, with what each achieves (XLA's
    too, returned). The cost model's reading (bound, diagnosis) is kept beside it under its own name, never as
    the measurement's."""
    ref, est, measured = verdict.ref, verdict.estimate, header.timing
    modelled = verdict.estimated()  # the model's reading of the same program, kept beside the measurement
    timing = {**asdict(measured), "calls_checked": header.calls_checked}
    timing["xplane"] = keep_trace(verdict.cand.id, trace, verdict.evaluator.home)
    flops, hbm = task_work(ref)
    figures = (ref.xla or {}).get("chip") or {}
    mine = achieved(flops, hbm, measured.median_s, figures)
    xla = achieved(flops, hbm, chip.timing.median_s, figures)
    timing["achieved"] = asdict(mine)
    timing["reference"] = {**asdict(chip.timing), "achieved": asdict(xla), "xplane": chip.trace}
    verdict.details["timing"] = timing
    verdict.checks.append(CheckResult("timing", True, f"median {measured.median_s * 1e6:,.1f} us over "
                                      f"{measured.runs} calls on the {kind}"))
    top = ", ".join(f"{name} {seconds * 1e6:,.1f} us" for name, seconds in measured.top_ops[:3])
    diagnosis = (f"measured: the costliest ops per call are {top}; {measured.wait_share:.0%} of the "
                 "device time is DMA or semaphore waits",
                 *(f"(cost model) {line}" for line in (modelled.diagnosis if modelled else ())))
    return Profile(verdict.cand.id, "device_trace", False, measured.median_s, chip.timing.median_s, "",
                   diagnosis, timing, roofline_fraction=mine.roofline_fraction, achieved=mine,
                   model=modelled.model if modelled else None,
                   arithmetic_intensity=(flops / hbm) if flops and hbm else None,
                   fits_memory=est.fits_vmem if est is not None else None,
                   reference_note=reference_note(chip), chip=kind, reference_measured=True,
                   reference_basis="XLA's own program of the task's reference, at the precision a user's jax.jit "
                                   "runs it,"), xla


def reference_note(chip) -> str:
    """What XLA's measured time is of: its program at jax's default matmul precision, and how far that is from
    the highest-precision reference on the chip (an f32 task's XLA can be fast because it is inexact)."""
    off = chip.xla_vs_exact
    text = "XLA's reference ran at jax's default matmul precision, as a user's jax.jit runs it"
    if chip.no_arbiter:
        return f"{text}; {chip.no_arbiter}, so its accuracy is not known."
    if off.get("mismatched"):
        text += (f"; its output is off the highest-precision reference by {off['max_abs_error']:.3g}, "
                 f"{off['mismatched']} values outside the task's tolerance")
    return text + "."
