"""The verdict's last step on a host with the chip: what the device worker reported, in checks and a measured
speed (``device_job.py`` ran the candidate's full-size program beside XLA's reference on the same inputs).

The speed is a measurement only: the candidate's device time and XLA's, from profiler traces taken the same
way in the same process, with what they achieve against the chip's peaks. An estimate never stands in for it
on such a host; a kernel verified but not timed carries no speed.
"""

from __future__ import annotations

from typing import Any

from attrs import evolve
from maxkernel_core import CheckResult, EvalStatus, Evaluation, Profile, TestReport

from ..sandbox.pool import JobOutcome
from .traces import keep_trace


def wrong_reason(judged: dict[str, Any], chip: str) -> str:
    """Why the full-size program is wrong on the chip, naming who is farther from the high-precision reference."""
    if "error" in judged:
        err = judged["error"]
        return f"the full-size program failed on the {chip}: {err.get('type', 'Error')}: {err.get('message', '')}"
    kernel, xla = judged["kernel_vs_exact"], judged["xla_vs_exact"]
    return (f"wrong on the {chip} at full size: against XLA's reference there, {judged['xla_disagreement']}; "
            f"against the highest-precision reference the kernel is off by {kernel['max_abs_error']:.3g} "
            f"({kernel['mismatched']} values outside the tolerance), XLA's own output by {xla['max_abs_error']:.3g} "
            f"({xla['mismatched']}): the kernel is the farther")


def right_line(judged: dict[str, Any], chip: str) -> str:
    if judged.get("against") == "xla":
        return f"the full-size outputs match XLA's reference on the {chip}"
    kernel, xla = judged["kernel_vs_exact"], judged["xla_vs_exact"]
    return (f"the full-size outputs differ from XLA's reference on the {chip} ({judged['xla_disagreement']}), and "
            f"the highest-precision reference sides with the kernel: it is off by {kernel['max_abs_error']:.3g}, "
            f"XLA's default-precision output by {xla['max_abs_error']:.3g}")


def achieved(flops: float | None, hbm_bytes: float | None, seconds: float, chip: dict[str, Any]) -> dict[str, Any]:
    """TFLOP/s and HBM GB/s a time achieves for the task's work, and the share of the chip's roofline (its
    floor, every FLOP at peak and every byte once, over the time)."""
    out: dict[str, Any] = {}
    peak_flops, peak_bw = chip.get("bf16_ops_per_second"), chip.get("mem_bw_bytes_per_second")
    floors = []
    if flops:
        out["tflops"] = flops / seconds / 1e12
        if peak_flops:
            floors.append(flops / peak_flops)
    if hbm_bytes:
        out["hbm_gbs"] = hbm_bytes / seconds / 1e9
        if peak_bw:
            floors.append(hbm_bytes / peak_bw)
    if floors:
        out["roofline_fraction"] = min(max(floors) / seconds, 1.0)
    return out


def task_work(ref) -> tuple[float | None, float | None]:
    """(the task's FLOPs, the bytes its inputs and outputs take in HBM): the same work for a kernel and XLA."""
    flops = ref.flops or (ref.work or {}).get("glue_flops") or None
    memory = (ref.xla or {}).get("memory") or {}
    hbm = (memory.get("argument_size_in_bytes") or 0) + (memory.get("output_size_in_bytes") or 0)
    return flops, hbm or None


def reference_achieved(ref) -> dict[str, Any]:
    flops, hbm = task_work(ref)
    return achieved(flops, hbm, ref.chip.timing["median_s"], (ref.xla or {}).get("chip") or {})


def judge_on_chip(verdict, checked: JobOutcome, message: str, report: TestReport) -> Evaluation:
    """The verdict from the device worker's report: incorrect on the chip, or ok with a measured speed."""
    kind = f"{verdict.ref.chip.device_kind} ({verdict.target})"
    verdict.details["device_sandbox"] = checked.sandbox
    judged = checked.last("chip_correctness")
    if judged is None:
        return verdict._ended_badly(checked, "device worker") or verdict.done(
            EvalStatus.CRASHED, "the device worker reported no result for the full-size program")
    judged = judged[0]
    verdict.details["chip_correctness"] = judged
    if not judged["ok"]:
        why = wrong_reason(judged, kind)
        verdict.checks.append(CheckResult("chip_correctness", False, why, judged))
        return verdict.done(EvalStatus.INCORRECT, why, test=evolve(report, passed=False, message=why))
    verdict.checks.append(CheckResult("chip_correctness", True, right_line(judged, kind), judged))
    message = f"{message}; {right_line(judged, kind)}"
    timed = checked.last("timing")
    if timed is None or not timed[0].get("ok"):
        bad = verdict._ended_badly(checked, "device worker")
        why = timed[0]["error"]["message"] if timed else (bad.reason if bad else "no timing reported")
        verdict.checks.append(CheckResult("timing", False, why))
        verdict.details["timing"] = f"not measured: timing on the {kind} failed: {why}"
        return verdict.done(EvalStatus.OK, message, test=report)  # verified, unmeasured: no speed is claimed
    header, trace = timed
    if not header["repeat"]["ok"]:
        why = ("the outputs of the timed full-size calls are wrong (a later call differs from the first: memory "
               f"read before it was written?): {wrong_reason(header['repeat']['detail'], kind)}")
        verdict.checks.append(CheckResult("timing", False, why))
        return verdict.done(EvalStatus.INCORRECT, why, test=evolve(report, passed=False, message=why))
    return verdict.done(EvalStatus.OK, message, test=report, profile=measured_profile(verdict, header, trace, kind))


def measured_profile(verdict, header: dict[str, Any], trace, kind: str) -> Profile:
    """The candidate's measured speed against XLA's, measured the same way, with what each achieves."""
    ref, est = verdict.ref, verdict.estimate
    timing = {k: header.get(k) for k in ("median_s", "times_s", "wall_median_s", "runs", "warmup", "top_ops",
                                         "wait_share")}
    timing["xplane"] = keep_trace(verdict.cand.id, trace)
    flops, hbm = task_work(ref)
    mine = achieved(flops, hbm, header["median_s"], (ref.xla or {}).get("chip") or {})
    timing["achieved"] = mine
    timing["reference"] = {**ref.chip.timing, "achieved": reference_achieved(ref), "xplane": ref.chip.trace}
    verdict.details["timing"] = timing
    verdict.checks.append(CheckResult("timing", True, f"median {header['median_s'] * 1e6:,.1f} us over "
                                      f"{header['runs']} calls on the {kind}"))
    return Profile(verdict.cand.id, "device_trace", False, header["median_s"], ref.chip.timing["median_s"],
                   est.bound if est is not None else "",
                   tuple(verdict.platform.diagnose(est)) if est is not None else (),
                   {**timing, "cost_model": verdict.details.get("cost_model")},
                   roofline_fraction=mine.get("roofline_fraction"),
                   arithmetic_intensity=(flops / hbm) if flops and hbm else None,
                   fits_memory=est.fits_vmem if est is not None else None,
                   reference_note=reference_note(ref), chip=kind, reference_measured=True,
                   reference_basis="XLA's own program of the task's reference, at the precision a user's jax.jit "
                                   "runs it,")


def reference_note(ref) -> str:
    """What XLA's measured time is of: its program at jax's default matmul precision, and how far that is from
    the highest-precision reference on the chip (an f32 task's XLA can be fast because it is inexact)."""
    off = ref.chip.xla_vs_exact
    text = "XLA's reference ran at jax's default matmul precision, as a user's jax.jit runs it"
    if off.get("mismatched"):
        text += (f"; its output is off the highest-precision reference by {off['max_abs_error']:.3g}, "
                 f"{off['mismatched']} values outside the task's tolerance")
    return text + "."
