"""One candidate's verdict, made in the parent from what the tracer and then the checker reported.

The tracer (the candidate's own sandbox) decides only what it cannot fake in
its favour: that the module failed to load or trace, or left something
running. Every fact that can pass a candidate — the proof of kernel, the
compile, the cross-check of the CPU program against the device program, the
outputs, the device time — comes from the checker, which never imported it.
The chip's own facts (check names, cost model) come from the evaluator's
``Platform``.
"""

from __future__ import annotations

import signal
from typing import Any

import numpy as np
from maxkernel_core import Candidate, CheckResult, CompileError, EvalStatus, Evaluation, Task, TestReport

from ..profiling.records import precision_note
from ..sandbox.records import JobOutcome, Limits
from . import messages, proof
from .compare import compare
from .traces import keep_artifact



def crash_reason(outcome: JobOutcome, limits: Limits) -> str:
    during = f" during {outcome.stage}" if outcome.stage else ""
    rc = outcome.returncode
    if rc is not None and rc < 0:
        sig = -rc
        hints = {
            signal.SIGSEGV: "segmentation fault: native code crashed",
            signal.SIGBUS: "bus error: native code crashed",
            signal.SIGABRT: "aborted (often a failed allocation or a fatal runtime check)",
            signal.SIGKILL: f"killed (SIGKILL), most likely over the memory limit ({limits.memory_mb} MiB beyond the warmed-up runtime)",
            signal.SIGXCPU: "over the CPU-time limit",
        }
        return f"worker {outcome.how_it_ended}{during}: {hints.get(sig, 'killed by a signal')}"
    if rc == 0:
        return f"worker exited (code 0) before reporting{during}: the module ended the process (os._exit?)"
    return f"worker {outcome.how_it_ended}{during}"


class Verdict:
    """Builds the checks and details of one evaluation; ``judge`` returns it."""

    def __init__(self, evaluator, task: Task, candidate: Candidate, target: str, ref) -> None:
        self.evaluator, self.task, self.cand, self.target, self.ref = evaluator, task, candidate, target, ref
        self.limits = evaluator.limits
        self.platform = evaluator.platform
        self.checks: list[CheckResult] = []
        self.details: dict[str, Any] = {"platform": ref.platform, "chip": ref.chip.device_kind if ref.chip else None}
        if ref.xla and not ref.xla.get("ok"):  # e.g. over the target's HBM, or past the compile limit
            self.details["xla_reference"] = f"no XLA estimate of the reference: {ref.xla['error']['message'][:300]}"
        elif ref.xla_estimate is not None:
            self.details["xla_reference"] = reference_details(ref)
        self.outcome: JobOutcome | None = None
        self.estimate = None  # the cost model's estimate, once founded and completed by the compile
        self.artifact = ""  # the digest of the full-size program the checker made and compiled, once it did
        self._estimated: tuple[Any, Any] = (None, None)  # (the estimate, its Profile), made by ``estimated``

    def done(self, status: EvalStatus, reason: str, **extra: Any) -> Evaluation:
        outcome = self.outcome
        if outcome is not None and outcome.log_tail and status in (EvalStatus.CRASHED, EvalStatus.TIMEOUT):
            self.details["log_tail"] = outcome.log_tail[-1500:]
        sandbox = self.details.get("sandbox") or ""
        return Evaluation(self.cand.id, status, reason, tuple(self.checks), self.details, target=self.target,
                          estimate=self.estimated(), sandbox=sandbox, artifact=self.artifact, **extra)

    def estimated(self):
        """The estimate as a speed figure (``Profile``, with its diagnosis and breakdown), or None. Made once per
        estimate: the CPU's verdict ships it as both its profile and its estimate, the chip's takes its diagnosis
        and breakdown beside the measurement."""
        if self._estimated[0] is not self.estimate:  # founded or completed since: made again, once
            made = self.modelled(lambda: self.platform.profile(self.cand.id, self.estimate, self.ref.xla_seconds,
                                                             _precision_note(self.ref)))
            self._estimated = (self.estimate, made)
        return self._estimated[1]

    def modelled(self, fn, *, founding: bool = False):
        """``fn()`` of the cost model on the current estimate (or, ``founding``, making it), or None. The model
        reads the kernels' description, whose numbers the candidate's program chose (a VMEM limit of 10**400,
        say): a failure there leaves the verdict without an estimate, said in its details, never with the
        judge's own exception."""
        if self.estimate is None and not founding:
            return None
        try:
            return fn()
        except Exception as exc:
            self.estimate = None
            self.details["no_estimate"] = (f"the cost model cannot read the program's kernels: "
                                           f"{type(exc).__name__}: {exc}"[:500])
            return None

    def ended_badly(self, outcome: JobOutcome, who: str) -> Evaluation | None:
        """The verdict on a worker (``who``) that timed out, ran out of memory or crashed; None when it did not
        (the chip's verdict asks it of the device worker too)."""
        error = _worker_error(outcome)
        if outcome.status == "timeout":
            return self.done(EvalStatus.TIMEOUT, f"no verdict within {self.limits.timeout_s:g} s (stuck during "
                             f"{outcome.stage or 'start-up'} in the {who}): look for an infinite loop or a grid far "
                             "too large")
        if error is not None and error.kind == "memory":
            return self.done(EvalStatus.CRASHED, f"{error.message} during {outcome.stage} in the {who}")
        if outcome.status == "crashed":
            return self.done(EvalStatus.CRASHED, f"{who}: {crash_reason(outcome, self.limits)}")
        return None

    # --- the tracer: the candidate's one run -------------------------------------------

    def judge(self, outcome: JobOutcome) -> Evaluation:
        self.outcome = outcome
        self.details.update(wall_s=round(outcome.wall_s, 3), sandbox=outcome.sandbox)
        traced = messages.decoded(outcome)
        if isinstance(traced, str):  # the tracer is the candidate's process: what it wrote is the candidate's
            self.checks.append(CheckResult("messages", False, traced))
            return self.done(EvalStatus.REJECTED, f"the candidate's process sent {traced} on the judge's pipe: a "
                             "candidate must not write to the judge")
        early = self._load_and_integrity(traced)
        if early is not None:
            return early
        trace = next((t for _, t in traced.checks("trace")), None)
        if trace is None or not trace.ok:
            bad = self.ended_badly(outcome, "tracer")
            if bad is not None:
                return bad
            error = _worker_error(outcome)
            err = (trace and trace.error) or messages.ErrorInfo(type="Error",
                                                               message=error.message if error else "no trace")
            size = trace.size if trace else 0
            self.checks.append(CheckResult("trace", False, err.message, {**err.as_details(), "size": size}))
            at = "full size" if not size else f"check size {size}"
            failed = f"tracing computation() at {at} failed: {err.type}: {err.message}{_line(err)}{_hint(err)}"
            refused = self._refused_at_full_size(trace.work if trace else None)
            if refused is not None:  # the full size's program is refused whatever the check size did: say that
                return self.done(EvalStatus.REJECTED, f"{refused} (besides, {failed})")
            return self.done(EvalStatus.COMPILE_ERROR, failed)
        return self._after_trace(traced, trace)

    def _refused_at_full_size(self, stats: messages.WorkCount | None) -> str | None:
        """The proof-of-kernel refusal of the full size's program by the tracer's own count (a count the candidate's
        process made: it may refuse, never pass), or None."""
        if stats is None:
            return None
        ok, why = proof.verdict({**stats.for_proof(), "unknown_ops": {}}, self.ref.program_work[0])
        if ok:
            return None
        self.checks.append(CheckResult("proof_of_kernel", False, why))
        return why

    def _load_and_integrity(self, traced: messages.Decoded) -> Evaluation | None:
        for name, check in traced.checks("load", "integrity"):
            if name == "load" and not check.ok:
                err = check.error
                self.checks.append(CheckResult("load", False, err.message, err.as_details()))
                if err.type == "SystemExit":
                    return self.done(EvalStatus.CRASHED, err.message)
                if err.type == "MemoryError":
                    return self.done(EvalStatus.CRASHED, f"ran out of memory (limit {self.limits.memory_mb} MiB beyond the warmed-up runtime) "
                                     f"while importing the module: {err.message}")
                return self.done(EvalStatus.COMPILE_ERROR, f"importing the module failed: {err.type}: "
                                 f"{err.message}{_line(err)}{_hint(err)}")
            if name == "integrity" and not check.ok:
                return self._patched(check.patched, check.when)
        if traced.checks("integrity"):
            self.checks.append(CheckResult("load", True))
        return None

    def _patched(self, patched: list[str], when: str) -> Evaluation:
        names = ", ".join(patched[:8])
        self.checks.append(CheckResult("integrity", False, names, {"patched": patched}))
        return self.done(EvalStatus.REJECTED, f"the module replaces {names} ({when}): candidates must not patch "
                         "libraries, timers or the harness")

    def _after_trace(self, traced: messages.Decoded, trace: messages.TraceCheck) -> Evaluation:
        if trace.patched:
            return self._patched(trace.patched, "while tracing")
        if trace.leftovers:
            left = ", ".join(trace.leftovers[:5])
            self.checks.append(CheckResult("trace", False, f"left running: {left}"))
            return self.done(EvalStatus.REJECTED, f"the module left {left} running after its trace: a candidate "
                             "must not start threads or processes (they could act while it is judged)")
        self.checks.append(CheckResult("trace", True))
        stats = trace.work
        if stats.pallas_calls == 0 or stats.callbacks:  # nothing was sent on: its own word refuses it
            return self.done(EvalStatus.REJECTED, self._refused_at_full_size(stats))
        lowering = next(((name, c) for name, c in traced.checks("compile", "export")), None)
        if lowering is not None and not lowering[1].ok:
            return self._lowering_failed(*lowering)
        bad = self.ended_badly(traced.outcome, "tracer")
        if bad is not None:
            return bad
        if not _well_formed(traced.read("jaxpr"), len(self.ref.check_sizes)):
            return self.done(EvalStatus.CRASHED, "the tracer did not send exactly one program for every size "
                             "(the full size, each check size, and the full size traced again)")
        checked = self.evaluator.check(self.task, self.target, self.ref, traced)
        return self._after_check(traced, checked)

    def _lowering_failed(self, name: str, check: messages.LoweringCheck) -> Evaluation:
        err = check.error
        compiled = name == "compile"
        name = self.platform.compile_check if compiled else "export"
        self.checks.append(CheckResult(name, False, err.message, {"error": err.as_details()}, check.seconds))
        what = f"{self.platform.label} compile for {self.target}" if compiled else "exporting the traced program"
        error = CompileError(err.kind or "lowering", err.message, err.line)
        return self.done(EvalStatus.COMPILE_ERROR, f"{what} failed{_line(err)}: {err.message}", compile_error=error)

    # --- the checker: facts from the exported program ------------------------------------

    def _after_check(self, traced: messages.Decoded, outcome: JobOutcome) -> Evaluation:
        self.outcome = outcome
        self.details["checker_sandbox"] = outcome.sandbox
        self.details["wall_s"] = round(traced.outcome.wall_s + outcome.wall_s, 3)
        checked = messages.decoded(outcome)
        if isinstance(checked, str):  # the checker never holds candidate code: a bug of the judge's, said as one
            return self.done(EvalStatus.CRASHED, f"the checker sent {checked}")
        refused = checked.last("refused")
        if refused is not None:
            self.checks.append(CheckResult("one_program", False, refused[0].why))
            return self.done(EvalStatus.REJECTED, refused[0].why)
        self._read_program(checked)
        lowering = next((c for _, c in checked.checks("compile") if not c.ok), None)
        if lowering is not None and (lowering.size != 0 or not checked.read("work")):
            return self._lowering_failed("compile", lowering)  # the compiler refused it while lowering, here
        works = {w.size: w.work for w, _ in checked.read("work")}
        if 0 not in works:
            return self.ended_badly(outcome, "checker") or self.done(EvalStatus.CRASHED, "the checker counted no work")
        full = messages.plain(works[0])  # the checker's count, stored whole
        self.details["work"] = full
        ok, why = proof.verdict(works[0].for_proof(), self.ref.program_work[0])
        self.checks.append(CheckResult("proof_of_kernel", ok, why, {"work": full}))
        if not ok:
            return self.done(EvalStatus.REJECTED, why)
        comp = checked.last("check")
        if comp is None:
            return self.ended_badly(outcome, "checker") or self.done(EvalStatus.CRASHED, "no compile result")
        canonical = outcome.last("canonical")
        if canonical is not None and comp[0].ok:
            self.artifact = keep_artifact(canonical[1][0], self.evaluator.home)  # the program every later fact is about
        failed = self._compile(comp[0])
        if failed is not None:
            return failed
        for size in range(1, len(self.ref.check_sizes) + 1):
            failed = self._small_program(works.get(size), size)
            if failed is not None:
                return failed
        bad = self.ended_badly(outcome, "checker")
        return bad or self._correctness(checked)

    def _compile(self, comp: messages.LoweringCheck) -> Evaluation | None:
        compile_details = {"seconds": comp.seconds, "memory": comp.memory, "cost": comp.cost,
                           "device_kind": comp.device_kind, "error": comp.error and comp.error.as_details()}
        self.details["compile"] = compile_details
        if not comp.ok:
            return self._lowering_failed("compile", comp)
        self.checks.append(CheckResult(self.platform.compile_check, True, comp.summary
                                       or f"compiled for {comp.device_kind}", compile_details, comp.seconds))
        # the compiled candidate shows what runs around the kernels
        self.estimate = self.modelled(lambda: self.platform.with_glue(self.estimate, comp.program))
        return None

    def _small_program(self, work: messages.WorkCount | None, size: int) -> Evaluation | None:
        if work is None:
            return self.ended_badly(self.outcome, "checker") or self.done(
                EvalStatus.CRASHED, f"the checker did not reach check size {size}")
        ok, why = proof.verdict(work.for_proof(), self.ref.program_work[size], size=f"check size {size}")
        if not ok:
            self.checks.append(CheckResult("proof_of_kernel", False, why, {"work": messages.plain(work), "size": size}))
            return self.done(EvalStatus.REJECTED, why)
        return None

    def _read_program(self, checked: messages.Decoded) -> None:
        """What the checker read of the program: its jaxpr-level work, and the cost model's estimate from its
        kernel description (on the verdict whatever it is: the debugger reads the estimate's diagnosis). Both from the checker,
        never from a message the candidate's process could write."""
        traced = checked.last("traced_work")
        if traced is not None:
            self.details["traced_work"] = messages.plain(traced[0].work)
            self.details["vmem_bytes_estimate"] = traced[0].work.vmem_bytes
        described = checked.last("kernels")
        if described is None or described[0].error is not None:
            self.details["no_estimate"] = described[0].error if described else "no kernel description"
            return
        self.estimate = self.modelled(lambda: self.platform.estimate(
            described[0].kernels, described[0].chip, self.target, reference_flops=self.ref.matmul_floor,
            ideal_f32_passes=self.ref.needed_passes), founding=True)

    def _correctness(self, checked: messages.Decoded) -> Evaluation:
        ref, task, cand = self.ref, self.task, self.cand
        if not ref.sets:  # nothing was found wrong, and nothing was checked: never ok, never incorrect
            self.checks.append(CheckResult("correctness", False, ref.note or "not run"))
            return self.done(EvalStatus.UNVERIFIED, f"correctness was not checked: {ref.note or 'no input sets'}")
        results = checked.read("outputs")
        worst_abs = worst_rel = 0.0
        per_set = []
        for sent, outputs in results:
            index = sent.index
            how = ref.sets[index]["how"]
            if sent.error is not None:
                err = sent.error
                self.checks.append(CheckResult("correctness", False, err.message,
                                               {"set": index, "how": how, **err.as_details()}))
                return self.done(EvalStatus.INCORRECT, f"raised {err.type} on input set {index} ({how}): "
                                 f"{err.message}", test=TestReport(cand.id, False, index, message=err.message))
            ok, why, d = compare(ref.outputs[index], outputs, task.atol, task.rtol)
            if not ok and index < len(ref.wide_outputs) and ref.wide_outputs[index]:
                ok, why, d = arbitrate(ref.wide_outputs[index], outputs, why, d, task.atol, task.rtol)
            per_set.append({"set": index, "how": how, **d})
            if not ok:
                self.checks.append(CheckResult("correctness", False, why, {"sets": per_set}))
                report = TestReport(cand.id, False, index + 1, d.get("max_abs_error"), d.get("max_rel_error"), why,
                                    {"sets": per_set})
                return self.done(EvalStatus.INCORRECT, f"wrong result on input set {index} ({how}): {why}", test=report)
            worst_abs, worst_rel = max(worst_abs, d["max_abs_error"]), max(worst_rel, d["max_rel_error"])
        if len(results) != len(ref.sets):
            return self.done(EvalStatus.CRASHED, f"only {len(results)} of {len(ref.sets)} input sets reported")
        at = f", {ref.note}" if ref.note else ""  # e.g. "at a derived small size (batch_size 1024->256, ...)"
        msg = f"{len(results)} input sets match the reference in Pallas interpret mode on CPU{at} (max abs error {worst_abs:.3g})"
        arbitrated = [p["set"] for p in per_set if p.get("arbiter")]
        if arbitrated:
            msg += (f"; set(s) {', '.join(map(str, arbitrated))} against the reference widened to f32, where the "
                    f"task's own reference overflows to NaN/Inf ({per_set[arbitrated[0]]['reference_disagreement']})")
        self.checks.append(CheckResult("correctness", True, msg, {"sets": per_set}))
        report = TestReport(cand.id, True, len(results), worst_abs, worst_rel, msg, {"sets": per_set})
        return self._on_chip(msg, report)

    def _on_chip(self, msg: str, report: TestReport) -> Evaluation:
        """On a host with the chip: the full-size program run there against XLA's, and timed (``chip_verdict``);
        elsewhere the cost model's estimate, labelled one (no speed is ever claimed measured without the chip)."""
        ref = self.ref
        if ref.chip is None:
            self.details["timing"] = ref.chip_note or f"not measured: no {self.platform.label} attached"
            return self.done(EvalStatus.OK, msg, test=report, profile=self.estimated())
        from .chip_verdict import judge_on_chip

        canonical = self.outcome.last("canonical")  # the program the checker proved and compiled, as it read it
        if canonical is None:
            return self.ended_badly(self.outcome, "checker") or self.done(
                EvalStatus.CRASHED, "the checker returned no full-size program for the chip")
        checked, chip = self.evaluator.check_on_chip(self.task, ref, canonical[1][0])
        self.outcome = checked
        return judge_on_chip(self, checked, chip, msg, report)


def _well_formed(programs: list, check_sizes: int) -> bool:
    """Exactly one program per size, 0 (the full size) to ``check_sizes``, and the full size traced again:
    the tracer writes these messages, and the checker must read exactly these."""
    first = sorted(p.size for p, _ in programs if not p.again)
    again = [p for p, _ in programs if p.again]
    return (first == list(range(check_sizes + 1)) and len(again) == 1 and again[0].size == 0
            and len(programs) == check_sizes + 2 and all(len(payload) == 1 for _, payload in programs))


def _hint(err: messages.ErrorInfo) -> str:
    """The installed jax's alternative to a name or signature the candidate used, as a sentence to act on."""
    return f". API of the installed jax: {err.hint}" if err.hint else ""


def _line(err: messages.ErrorInfo) -> str:
    return f" (candidate line {err.line})" if err.line else ""


def _worker_error(outcome: JobOutcome) -> messages.WorkerError | None:
    """The last error a worker reported, as its record; None when there is none or it is not one (a message
    that is not what a worker sends says nothing about how the job ended)."""
    found = outcome.last("error")
    if found is None:
        return None
    try:
        return messages.structure({k: v for k, v in found[0].items() if k != "type"}, messages.WorkerError, "error")
    except ValueError:
        return None


def _precision_note(ref) -> str:
    return precision_note((ref.xla or {}).get("precision"))


def reference_details(ref) -> dict[str, Any]:
    """The estimate of the XLA reference as the record keeps it: time, precision, the costliest ops, notes."""
    est = ref.xla_estimate
    return {**est.as_dict(top=8), "precision": (ref.xla or {}).get("precision"),
            "libtpu_optimal_seconds": ((ref.xla or {}).get("cost") or {}).get("optimal_seconds")}


def arbitrate(wide: list[np.ndarray], outputs: list[np.ndarray], why: str, d: dict[str, Any], atol, rtol):
    """A kernel that differs from a reference whose outputs hold NaN or Inf, held against the reference widened
    to f32 (``jobs._wide_outputs``): it passes when it matches that one, and the verdict says which side was
    right either way."""
    ok, wide_why, wide_d = compare(wide, outputs, atol, rtol)
    if ok:
        return True, "", {**wide_d, "arbiter": "f32", "reference_disagreement": why}
    return False, (f"{why}; the reference widened to f32 at the highest precision disagrees with the kernel too "
                   f"({wide_why}): the kernel is wrong"), {**d, "arbiter": "f32"}
