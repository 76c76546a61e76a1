"""The evaluation cascade, run from the parent: jobs go to workers, verdicts are made here.

1. load & trace at full size (abstract inputs)      -> compile_error on failure
2. proof of kernel (work inside pallas_call)         -> rejected
3. TPU compile for the target at full size (libtpu)  -> compile_error, with Mosaic's message
4. correctness over several input sets, one process  -> incorrect
5. device timing from profiler traces (TPU only)     -> never claimed on CPU

plus, around all of it: integrity (no patched libraries) -> rejected; a hang ->
timeout; a dead worker -> crashed. The first failing check decides.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import numpy as np
from attrs import frozen
from maxkernel_core import Candidate, CheckResult, EvalStatus, Evaluation, Profile, Task, TaskError, TestReport

from ..profiling.costmodel import estimate, with_glue, xla_reference_seconds
from ..profiling.diagnosis import as_details, diagnose, profile_record
from ..sandbox.pool import JobOutcome, Limits, WorkerPool
from ..targets import check_target
from . import proof
from .compare import compare

#: A task without a small size is still checked on CPU at full size while its inputs stay under this.
FULL_SIZE_CPU_INPUT_BYTES = 256 << 20


@frozen
class ReferenceData:
    """What the trusted reference job produced, kept per task for every candidate."""

    full_shapes: list[dict[str, Any]]
    static_full: Any
    work: dict[str, Any]
    flops: float | None
    sets: list[dict[str, Any]]  # how, static, n_inputs
    inputs: list[list[np.ndarray]]
    outputs: list[list[np.ndarray]]
    platform: str
    note: str = ""
    timing: dict[str, Any] | None = None
    timing_outputs: list[np.ndarray] | None = None
    xla: dict[str, Any] | None = None  # XLA's compile of the reference for the target: cost, memory

    @property
    def xla_seconds(self) -> float | None:
        """XLA's own estimate of the reference on the target (an estimate, like the cost model's)."""
        if not self.xla or not self.xla.get("ok"):
            return None
        cost = self.xla.get("cost") or {}
        seconds = xla_reference_seconds(cost, self.xla["chip"])
        # XLA's cost analysis counts a loop body once (a lax.map over query chunks, a scan over
        # experts); the traced jaxpr counts it per trip. The matmul work it missed sets a floor: the
        # traced FLOPs at the MXU's peak. (Scaling the whole estimate would also multiply the work
        # outside the loop, such as a gather before a scan over tiles.)
        counted, traced = cost.get("flops") or 0.0, (self.work or {}).get("glue_flops") or 0
        if seconds and counted and traced > 1.5 * counted:
            seconds = max(seconds, traced / self.xla["chip"]["bf16_ops_per_second"])
        return seconds


def _crash_reason(outcome: JobOutcome, limits: Limits) -> str:
    during = f" during {outcome.stage}" if outcome.stage else ""
    rc = outcome.returncode
    if rc is not None and rc < 0:
        sig = -rc
        hints = {
            signal.SIGSEGV: "segmentation fault: native code crashed",
            signal.SIGBUS: "bus error: native code crashed",
            signal.SIGABRT: "aborted (often a failed allocation or a fatal runtime check)",
            signal.SIGKILL: f"killed (SIGKILL), most likely over the {limits.memory_mb} MiB memory limit",
            signal.SIGXCPU: "over the CPU-time limit",
        }
        return f"worker {outcome.how_it_ended}{during}: {hints.get(sig, 'killed by a signal')}"
    if rc == 0:
        return f"worker exited (code 0) before reporting{during}: the module ended the process (os._exit?)"
    return f"worker {outcome.how_it_ended}{during}"


class Evaluator:
    """Judges candidates for one backend instance; thread-safe, workers shared."""

    def __init__(self, limits: Limits | None = None, fresh_inputs: int = 3, spares: int = 1) -> None:
        self.limits = limits or Limits()
        self.fresh_inputs = fresh_inputs
        self.pool = WorkerPool(self.limits, spares=spares)
        self._references: dict[tuple, ReferenceData] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self.pool.close()

    # --- the reference ------------------------------------------------------------

    def reference(self, task: Task, target: str = "v5e") -> ReferenceData:
        module = Path(task.metadata["module"])
        key = (task.id, str(module), module.stat().st_mtime_ns, self.fresh_inputs, target)
        with self._lock:
            if key in self._references:
                return self._references[key]
        size = "small" if "small" in task.sizes else "full"
        job = {"kind": "reference", "task": task.metadata, "fresh": self.fresh_inputs, "size": size, "target": target,
               "max_full_input_bytes": FULL_SIZE_CPU_INPUT_BYTES, "timing": True}
        self.pool.warm_up()  # candidate workers warm while the reference runs
        outcome = self.pool.run_trusted(job, timeout=max(self.limits.timeout_s, 600))
        head = outcome.last("reference")
        error = outcome.last("error")
        if outcome.status != "done" or head is None or error:
            why = error[0]["message"] if error else (
                "timed out" if outcome.status == "timeout" else _crash_reason(outcome, self.limits))
            raise TaskError(f"the reference of task {task.id!r} ({module}) failed: {why}")
        header = head[0]
        sets, inputs, outputs = [], [], []
        for set_header, arrays in outcome.all("reference_set"):
            n = set_header["n_inputs"]
            sets.append({"how": set_header["how"], "static": set_header["static"], "n_inputs": n})
            inputs.append(arrays[:n])
            outputs.append(arrays[n:])
        timing = outcome.last("reference_timing")
        data = ReferenceData(header["full_shapes"], header["static_full"], header["work"], header.get("flops"),
                             sets, inputs, outputs, header.get("platform", "cpu"), header.get("note", ""),
                             timing[0] if timing else None, timing[1] if timing else None, header.get("xla"))
        with self._lock:
            self._references[key] = data
        return data

    # --- a candidate --------------------------------------------------------------

    def evaluate(self, task: Task, candidate: Candidate, *, target: str) -> Evaluation:
        check_target(target)
        ref = self.reference(task, target)
        job = {"kind": "candidate", "target": target, "task": task.metadata, "full_shapes": ref.full_shapes,
               "static_full": ref.static_full, "stop_unless_kernel": True, "timing": ref.platform == "tpu",
               "sets": ref.sets}
        arrays = [a for set_inputs in ref.inputs for a in set_inputs]
        outcome = self.pool.run_untrusted(job, arrays, files={"candidate.py": candidate.code})
        return self._verdict(task, candidate, target, ref, outcome)

    def _verdict(self, task: Task, cand: Candidate, target: str, ref: ReferenceData, outcome: JobOutcome) -> Evaluation:
        checks: list[CheckResult] = []
        details: dict[str, Any] = {"wall_s": round(outcome.wall_s, 3), "platform": ref.platform}

        def done(status: EvalStatus, reason: str, **extra: Any) -> Evaluation:
            if outcome.log_tail and status in (EvalStatus.CRASHED, EvalStatus.TIMEOUT):
                details["log_tail"] = outcome.log_tail[-1500:]
            return Evaluation(cand.id, status, reason, tuple(checks), details, target=target, **extra)

        by_name = {h["name"]: h for h, _ in outcome.all("check")}
        for header, _ in outcome.all("check"):
            name = header["name"]
            if name == "load" and not header["ok"]:
                err = header["error"]
                checks.append(CheckResult("load", False, err["message"], err))
                if err["type"] == "SystemExit":
                    return done(EvalStatus.CRASHED, err["message"])
                if err["type"] == "MemoryError":
                    return done(EvalStatus.CRASHED, f"ran out of memory (limit {self.limits.memory_mb} MiB) while "
                                f"importing the module: {err['message']}")
                line = f" (candidate line {err['line']})" if err.get("line") else ""
                return done(EvalStatus.COMPILE_ERROR, f"importing the module failed: {err['type']}: {err['message']}{line}")
            if name == "integrity" and not header["ok"]:
                patched = ", ".join(header["patched"][:8])
                checks.append(CheckResult("integrity", False, patched, {"patched": header["patched"]}))
                return done(EvalStatus.REJECTED, f"the module replaces {patched} ({header['when']}): candidates must "
                            "not patch libraries, timers or the harness")
        if "load" not in by_name and "integrity" in by_name:
            checks.append(CheckResult("load", True))

        error = outcome.last("error")
        if outcome.status == "timeout":
            return done(EvalStatus.TIMEOUT, f"no verdict within {self.limits.timeout_s:g} s (stuck during "
                        f"{outcome.stage or 'start-up'}): look for an infinite loop or a grid far too large")
        if error and error[0].get("kind") == "memory":
            return done(EvalStatus.CRASHED, f"{error[0]['message']} during {outcome.stage}")
        if outcome.status == "crashed":
            return done(EvalStatus.CRASHED, _crash_reason(outcome, self.limits))

        trace = by_name.get("trace")
        if trace is None or not trace["ok"]:
            err = (trace or {}).get("error") or {"type": "Error", "message": error[0]["message"] if error else "no trace"}
            checks.append(CheckResult("trace", False, err["message"], err))
            line = f" (candidate line {err['line']})" if err.get("line") else ""
            return done(EvalStatus.COMPILE_ERROR, f"tracing computation() at full size failed: {err['type']}: "
                        f"{err['message']}{line}")
        checks.append(CheckResult("trace", True, details={"work": trace["work"]}))
        details["work"] = trace["work"]
        estimate = self._cost_model(outcome, target, ref, details)
        details["vmem_bytes_estimate"] = trace["work"].get("vmem_bytes")
        ok, why = proof.verdict(trace["work"])
        checks.append(CheckResult("proof_of_kernel", ok, why))
        if not ok:
            return done(EvalStatus.REJECTED, why)

        comp = by_name.get("compile")
        if comp is None:
            return done(EvalStatus.CRASHED, "the worker reported no compile result")
        compile_details = {k: comp.get(k) for k in ("seconds", "memory", "cost", "device_kind", "error")}
        details["compile"] = compile_details
        if not comp["ok"]:
            err = comp["error"]
            line = f" (candidate line {err['line']})" if err.get("line") else ""
            checks.append(CheckResult("tpu_compile", False, err["message"], compile_details, comp["seconds"]))
            return done(EvalStatus.COMPILE_ERROR, f"TPU compile for {target} failed{line}: {err['message']}")
        checks.append(CheckResult("tpu_compile", True, f"compiled for {comp.get('device_kind')}", compile_details,
                                  comp["seconds"]))
        if estimate is not None:  # the compiled candidate shows what runs around the kernels
            estimate = with_glue(estimate, comp.get("cost"))
            details["cost_model"] = {**as_details(estimate, ref.xla_seconds), "diagnosis": diagnose(estimate)}
        return self._correctness(task, cand, ref, outcome, checks, details, done, estimate)

    @staticmethod
    def _cost_model(outcome: JobOutcome, target: str, ref: ReferenceData, details: dict[str, Any]):
        """The static estimate for this candidate (in details whatever the verdict: the debugger uses it)."""
        described = outcome.last("kernels")
        if described is None or "error" in described[0]:
            details["cost_model"] = {"error": described[0]["error"] if described else "no kernel description"}
            return None
        est = estimate(described[0]["kernels"], described[0]["chip"], target)
        details["cost_model"] = as_details(est, ref.xla_seconds)
        details["cost_model"]["diagnosis"] = diagnose(est)
        return est

    def _correctness(self, task, cand, ref, outcome, checks, details, done, estimate=None) -> Evaluation:
        results = outcome.all("outputs")
        if not ref.sets:
            checks.append(CheckResult("correctness", False, ref.note or "not run"))
            return done(EvalStatus.INCORRECT, f"correctness was not verified: {ref.note or 'no input sets'}")
        worst_abs = worst_rel = 0.0
        per_set = []
        for header, outputs in results:
            index = header["index"]
            how = ref.sets[index]["how"]
            if "error" in header:
                err = header["error"]
                if err["type"] == "MemoryError":
                    return done(EvalStatus.CRASHED, f"ran out of memory (limit {self.limits.memory_mb} MiB) on "
                                f"input set {index}: {err['message']}")
                line = f" (candidate line {err['line']})" if err.get("line") else ""
                checks.append(CheckResult("correctness", False, err["message"], {"set": index, "how": how, **err}))
                report = TestReport(cand.id, False, index, message=err["message"])
                return done(EvalStatus.INCORRECT, f"raised {err['type']} on input set {index} ({how}){line}: "
                            f"{err['message']}", test=report)
            ok, why, d = compare(ref.outputs[index], outputs, task.atol, task.rtol)
            per_set.append({"set": index, "how": how, **d})
            if not ok:
                checks.append(CheckResult("correctness", False, why, {"sets": per_set}))
                report = TestReport(cand.id, False, index + 1, d.get("max_abs_error"), d.get("max_rel_error"), why,
                                    {"sets": per_set})
                return done(EvalStatus.INCORRECT, f"wrong result on input set {index} ({how}): {why}", test=report)
            worst_abs = max(worst_abs, d["max_abs_error"])
            worst_rel = max(worst_rel, d["max_rel_error"])
        if len(results) != len(ref.sets):
            return done(EvalStatus.CRASHED, f"only {len(results)} of {len(ref.sets)} input sets reported")
        mode = "on the TPU" if ref.platform == "tpu" else "in Pallas interpret mode on CPU"
        msg = f"{len(results)} input sets match the reference {mode} (max abs error {worst_abs:.3g})"
        checks.append(CheckResult("correctness", True, msg, {"sets": per_set}))
        report = TestReport(cand.id, True, len(results), worst_abs, worst_rel, msg, {"sets": per_set})
        profile, failure = self._timing(task, cand, ref, outcome, checks, details)
        if failure:
            return done(EvalStatus.INCORRECT, failure, test=report)
        if profile is None and estimate is not None:  # no device: the labelled estimate stands in
            profile = profile_record(cand.id, estimate, ref.xla_seconds)
        return done(EvalStatus.OK, msg, test=report, profile=profile)

    @staticmethod
    def _keep_trace(candidate_id: str, payload: list[np.ndarray]) -> str | None:
        """Store the last timed call's .xplane.pb beside the run store, for XProf/TensorBoard."""
        if not payload:
            return None
        folder = _traces_dir() / candidate_id / "plugins" / "profile" / "maxkernel"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "device.xplane.pb"
        path.write_bytes(payload[0].tobytes())
        return str(path)

    def _timing(self, task, cand, ref, outcome, checks, details) -> tuple[Profile | None, str | None]:
        """Device time on a TPU; on CPU none (no speed is claimed without the hardware)."""
        if ref.platform != "tpu":
            details["timing"] = "not measured: no TPU attached (the cost model gives estimates)"
            return None, None
        timed = outcome.last("timing")
        if timed is None or not timed[0].get("ok"):
            msg = timed[0]["error"]["message"] if timed else "no timing reported"
            checks.append(CheckResult("timing", False, msg))
            return None, None  # verified correct, but unmeasured: no speed claimed
        header, payload = timed
        outputs = payload[:header.get("n_outputs", len(payload))]
        kept = self._keep_trace(cand.id, payload[len(outputs):])
        if ref.timing_outputs is not None:
            ok, why, _ = compare(ref.timing_outputs, outputs, task.atol, task.rtol)
            if not ok:
                checks.append(CheckResult("timing", False, why))
                return None, f"the outputs of the timed full-size calls are wrong: {why}"
        details["timing"] = {k: header.get(k) for k in ("median_s", "times_s", "runs", "warmup", "top_ops", "wait_share")}
        details["timing"]["xplane"] = kept
        ref_s = (ref.timing or {}).get("median_s")
        checks.append(CheckResult("timing", True, f"median {header['median_s'] * 1e6:.1f} us over {header['runs']} runs"))
        measured = {**details["timing"], "cost_model": details.get("cost_model")}
        model = details.get("cost_model") or {}
        if model.get("seconds") and model.get("roofline_fraction"):
            # The roofline's floor (every byte once, every FLOP at peak) over the measured time.
            measured["roofline_fraction"] = model["seconds"] * model["roofline_fraction"] / header["median_s"]
            measured["arithmetic_intensity"] = model.get("arithmetic_intensity")
        diagnosis = tuple((details.get("cost_model") or {}).get("diagnosis", ()))
        return Profile(cand.id, "device_trace", False, header["median_s"], ref_s, diagnosis=diagnosis,
                       details=measured), None


def _traces_dir() -> Path:
    from maxkernel_core.store import default_home

    return default_home() / "traces"


def evaluator_from_settings(settings) -> Evaluator:
    """An evaluator configured by the ``[eval]`` settings."""
    ev = settings.eval
    limits = Limits(timeout_s=ev.timeout_s, memory_mb=ev.memory_mb, device=ev.device)
    return Evaluator(limits, fresh_inputs=max(ev.fresh_inputs, 0), spares=max(ev.spares, 0))
