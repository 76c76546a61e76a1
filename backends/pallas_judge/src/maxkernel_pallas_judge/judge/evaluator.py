"""The evaluation cascade, run from the parent: jobs go to sandboxed workers, verdicts are made here.

The candidate's Python runs once, in the tracer's sandbox, to trace
``computation`` on abstract inputs at every size and export that one program
(``trace_job``). Everything judged derives from the exported program, in a
checker sandbox that never imported the candidate (``check_job``):

1. load & trace at every size (abstract inputs)     -> compile_error on failure
   (threads or processes left running after it      -> rejected)
2. proof of kernel, from the checker's count of the
   exported device program against the reference's  -> rejected
3. compile of that program for the target            -> compile_error, with the compiler's message
4. the CPU interpret program held against the device
   program, then run on several input sets           -> rejected / incorrect
5. on a host with the chip, in the one device worker:
   the full-size device program against XLA's program
   of the reference on the same inputs (a high-precision
   reference decides who is wrong where they differ),
   then both timed the same way from profiler traces  -> incorrect / measured
   (no chip: the cost model's labelled estimate; never a measurement)

What is chip-specific (lowering, compile, kernels, figures, cost model) is the
backend's ``Platform`` (``platform.py``); the TPU's is the default.

plus, around all of it: integrity (no patched libraries) -> rejected; a hang ->
timeout; a dead worker -> crashed. The first failing check decides.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any

import attrs
import numpy as np
from attrs import field, frozen
from maxkernel_core import Candidate, EvalStatus, Evaluation, Fit, Task, TaskError
from maxkernel_core.store import default_home

from ..sandbox.pool import WorkerPool
from ..sandbox.records import JobOutcome, Limits
from .platform import Platform, load_platform
from .chip_host import ChipHolder, ChipReference
from . import messages
from .job_records import CheckJob, ProgramSlot, ReferenceJob, SetSlot, TraceJob
from .reference_cache import ReferenceCache, cache_folder
from .verdict import Verdict, crash_reason

#: A task without its own small size is checked on CPU at full size while one input set (every input of one
#: call) is at most this; above it, at a derived small size (judge/small_size.py), or not at all: unverified.
FULL_SIZE_CPU_INPUT_BYTES = 16 << 20


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
    #: the reference on the chip (hosts with the chip, when the target is the attached chip); None elsewhere
    chip: ChipReference | None = None
    #: why nothing is measured (no chip, another chip than the target, XLA's reference failed on the chip)
    chip_note: str = ""
    xla: dict[str, Any] | None = None  # XLA's compile of the reference for the target: cost, memory
    program_work: list[dict[str, Any]] = []  # per size (0 = full), counted as the checker counts a candidate
    check_sizes: list[dict[str, Any]] = []  # the distinct shapes of the sets: what the tracer traces

    target: str = "v5e"
    #: the reference's full-size program fingerprint (the tuned table's key)
    signature: str = ""
    #: the chip's judge facts (its cost model estimates XLA's reference)
    judge_platform: Platform | None = field(default=None, eq=False, repr=False)
    #: per set: the reference widened to f32 where its outputs hold NaN/Inf (``jobs._wide_outputs``), else []
    wide_outputs: list[list[np.ndarray]] = field(factory=list, eq=False, repr=False)
    #: whether the check size is one the judge derived (a task with no small size of its own)
    derived: bool = False
    _memo: dict[str, Any] = field(factory=dict, eq=False, repr=False)

    @property
    def xla_estimate(self):
        """The speed model's estimate of the XLA reference on the target (``xla_model``): the same kind of
        estimate as a candidate's, from the compiled program's ops, at the precision the task needs."""
        if not self.xla or not self.xla.get("ok") or self.judge_platform is None:
            return None
        if "xla" not in self._memo:
            self._memo["xla"] = self.judge_platform.xla_estimate(self.xla, self.target)
        return self._memo["xla"]

    @property
    def matmul_floor(self) -> float | None:
        """The reference's matmul FLOPs that size a kernel's run-time grid axis in the cost model: the lesser of
        its traced count and its exported program's, each an upper bound on what it needs (the export can do
        more: XLA's CPU ragged_dot multiplies every row by every group's matrix, 8x the work with 8 groups)."""
        exported = (self.program_work[0] if self.program_work else {}).get("glue_flops")
        counts = [c for c in ((self.work or {}).get("glue_flops"), exported) if c]
        return min(counts) if counts else None

    @property
    def needed_passes(self) -> float | None:
        """bf16 passes an f32 matmul needs to pass the task's check (1, 3 or 6); None when not decided."""
        precision = (self.xla or {}).get("precision") or {}
        return float(precision["passes"]) if "passes" in precision else None

    @property
    def xla_seconds(self) -> float | None:
        """The estimated time of the XLA reference (an estimate, like the cost model's of a candidate)."""
        est = self.xla_estimate
        return est.seconds if est is not None and est.seconds > 0 else None


class Evaluator:
    """Judges candidates for one backend instance; thread-safe, workers shared."""

    def __init__(self, limits: Limits | None = None, fresh_inputs: int = 3, spares: int = 1,
                 reference_timeout_s: float = 900.0, reference_compile_timeout_s: float = 240.0,
                 check_target=None, references_at_once: int = 1, home: Path | None = None,
                 reference_cache: str = "") -> None:
        self.limits = limits or Limits()
        #: the run store's folder: where verdicts keep programs and traces (``store.home``)
        self.home = home or default_home()
        folder = cache_folder(reference_cache, self.home)
        if folder is not None:  # made now, so that every worker's sandbox finds it to hide
            with contextlib.suppress(OSError):
                folder.mkdir(parents=True, exist_ok=True)
            self.limits = attrs.evolve(self.limits, hidden=(*self.limits.hidden, str(folder)))
        #: references kept across processes (``reference_cache.py``); None: "off"
        self.references = ReferenceCache(folder, skip=(self.home,)) if folder else None
        self.platform: Platform = load_platform(self.limits.platform)
        self.check_target = check_target or (lambda target: target)
        self.fresh_inputs = fresh_inputs
        self.reference_timeout_s = reference_timeout_s
        self.reference_compile_timeout_s = reference_compile_timeout_s
        self.pool = WorkerPool(self.limits, spares=spares, trusted_at_once=references_at_once)
        # each task judged at once keeps its full-size inputs, to put back on the chip when its check comes
        self.chip = ChipHolder(self.pool, self.platform, reference_timeout_s, self.home, keep=references_at_once + 1)
        self._references: dict[tuple, ReferenceData] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self.pool.close()

    def measures(self, target: str) -> tuple[bool, str]:
        """(whether ``target``'s programs are run and timed on this host's chip, why not when they are not)."""
        label = self.platform.label
        if self.limits.device == "cpu":
            return False, "not measured: [eval] device is cpu (the cost model gives estimates)"
        if not self.pool.on_device:
            return False, f"not measured: no {label} attached (the cost model gives estimates)"
        attached = self.platform.attached_target()
        if self.platform.found().busy and attached is None:
            return False, (f"not measured: the {label} is held by another process (one process at a time can "
                           "hold it): the cost model gives estimates")
        if attached != target:
            chip = self.platform.found().kind or label
            return False, (f"not measured: the attached {label} is {chip} ({attached or 'a chip not modelled'}), "
                           f"not the target {target}: pass --target {attached} to measure on it")
        return True, ""

    # --- the reference ------------------------------------------------------------

    def reference(self, task: Task, target: str = "v5e", gentler: bool = False) -> ReferenceData:
        """The task's reference, prepared once; ``gentler``: at the gentlest derived size the CPU's full-size
        limit allows, for a candidate that failed at the usual one (``evaluate``)."""
        module = Path(task.metadata["module"])
        key = (task.id, str(module), module.stat().st_mtime_ns, self.fresh_inputs, target, gentler)
        with self._lock:
            if key in self._references:
                return self._references[key]
        size = "small" if "small" in task.sizes else "full"
        measure, chip_note = self.measures(target)
        job = ReferenceJob(platform=self.platform.spec, task=task.metadata, fresh=self.fresh_inputs, size=size,
                           target=target, max_full_input_bytes=FULL_SIZE_CPU_INPUT_BYTES, device=measure,
                           compile_timeout_s=self.reference_compile_timeout_s, atol=task.atol, rtol=task.rtol,
                           small_set_bytes=FULL_SIZE_CPU_INPUT_BYTES if gentler else None)
        self.pool.warm_up()  # candidate workers warm while the reference runs
        outcome = self._reference_job(job, module)
        head = outcome.last("reference")
        error = outcome.last("error")
        if outcome.status == "timeout":
            raise TaskError(f"the reference of task {task.id!r} ({module}) did not finish within "
                            f"{self.reference_timeout_s:g} s (stuck during {outcome.stage or 'start-up'}): give the "
                            "task a smaller small size, or raise [eval] reference_timeout_s")
        if outcome.status != "done" or head is None or error:
            why = error[0]["message"] if error else crash_reason(outcome, self.limits)
            raise TaskError(f"the reference of task {task.id!r} ({module}) failed: {why}")
        header = head[0]
        sets, inputs, outputs, wide = [], [], [], []
        for set_header, arrays in outcome.all("reference_set"):
            n, n_out = set_header["n_inputs"], set_header["n_outputs"]
            sets.append({"how": set_header["how"], "static": set_header["static"], "n_inputs": n,
                         "size": set_header["size"]})
            inputs.append(arrays[:n])
            outputs.append(arrays[n:n + n_out])
            wide.append(arrays[n + n_out:])
        chip = None
        payload = outcome.last("device_payload") or outcome.last("device_payload_error")
        if measure and payload is not None:
            chip, chip_note = self.chip.hold(task, key, payload)
        data = ReferenceData(header["full_shapes"], header["static_full"], header["work"], header.get("flops"),
                             sets, inputs, outputs, header.get("platform", "cpu"), header.get("note", ""),
                             chip, chip_note, header.get("xla"), header["program_work"], header["check_sizes"],
                             target, header.get("signature", ""), self.platform, wide_outputs=wide,
                             derived=bool(header.get("derived")))
        with self._lock:
            self._references[key] = data
        return data

    def _reference_job(self, job: ReferenceJob, module: Path) -> JobOutcome:
        """The reference job's outcome: from the reference cache when the same job on the same task files, code
        and libraries is kept there (never one put on the chip, held and timed there afresh), else run now."""
        key = kept = None
        if self.references is not None and not job.device:
            try:  # a fault of the cache (its folder, the task's files) costs the time it would have saved, no more
                key = self.references.key(job.header(), module, job.platform)
                kept = self.references.load(key) if key else None
            except Exception:  # noqa: BLE001
                key = kept = None
        if kept is not None:
            return JobOutcome("done", kept)
        outcome = self.pool.run_trusted(job, timeout=self.reference_timeout_s)
        if key and outcome.status == "done":
            with contextlib.suppress(Exception):  # kept only if the task and the code are still what the key says
                if self.references.key(job.header(), module, job.platform) == key:
                    self.references.store(key, outcome.messages)
        return outcome

    def release(self, task: Task) -> None:
        """Let go of ``task``'s references (their input sets, and on a host with the chip XLA's and the
        high-precision reference's full-size outputs): a caller done with a task keeps memory for the next."""
        with self._lock:
            gone = [v for k, v in self._references.items() if k[0] == task.id]
            self._references = {k: v for k, v in self._references.items() if k[0] != task.id}
        self.chip.release([ref.chip.key for ref in gone if ref.chip is not None])

    def check_on_chip(self, task: Task, ref: ReferenceData, program: np.ndarray):
        """Run a checked candidate's full-size device program on the chip (``chip_host``): (what came back,
        the chip's reference it ran against, rebuilt when the parent had let this task's inputs go)."""

        def rebuild():
            with self._lock:
                self._references = {k: v for k, v in self._references.items() if v is not ref}
            return self.reference(task, ref.target).chip

        return self.chip.check(task, ref.chip, program, rebuild)

    # --- a candidate --------------------------------------------------------------

    def evaluate(self, task: Task, candidate: Candidate, *, target: str) -> Evaluation:
        self.check_target(target)
        ref = self.reference(task, target)
        first = self._judge(task, candidate, target, ref)
        if not (ref.derived and _failed_at_check_size(first)):
            return first
        # A derived size is the judge's choice, not the task's: a kernel that fails only there (a block size
        # hard-coded for the full size) is checked once more closer to the full size; both failing keeps the first.
        gentler = self.reference(task, target, gentler=True)
        if gentler.check_sizes == ref.check_sizes:
            return first
        second = self._judge(task, candidate, target, gentler)
        if second.status != EvalStatus.OK:
            return first
        details = {**second.details, "smaller_check_size": {"note": ref.note, "failed": first.reason}}
        reason = f"{second.reason}; it failed at the smaller size the judge derived first ({ref.note})"
        return attrs.evolve(second, reason=reason, details=details)

    def _judge(self, task: Task, candidate: Candidate, target: str, ref: ReferenceData) -> Evaluation:
        job = TraceJob(platform=self.platform.spec, target=target, full_shapes=ref.full_shapes,
                       static_full=ref.static_full, check_sizes=ref.check_sizes,
                       entry=task.metadata.get("entry", "computation"), wrap=task.metadata.get("wrap", ""))
        traced = self.pool.run_untrusted(job, [], files={"candidate.py": candidate.code})
        return Verdict(self, task, candidate, target, ref).judge(traced)

    def check_fit(self, task: Task, candidate: Candidate, *, target: str) -> Fit | None:
        """Whether the candidate's kernels fit VMEM by the cost model, from one trace at full size in a fresh
        tracer sandbox (no export, no compile); None when the trace does not describe them (the full
        evaluation will say why)."""
        ref = self.reference(task, target)
        job = TraceJob(platform=self.platform.spec, target=target, full_shapes=ref.full_shapes,
                       static_full=ref.static_full, check_sizes=[], describe_only=True,
                       entry=task.metadata.get("entry", "computation"), wrap=task.metadata.get("wrap", ""))
        traced = self.pool.run_untrusted(job, [], files={"candidate.py": candidate.code})
        read = messages.decoded(traced) if traced.status == "done" else "no description"
        if isinstance(read, str):
            return None  # no description to go by (or one the candidate's process wrote otherwise than the tracer)
        described = read.last("kernels")
        if described is None or described[0].error is not None or not described[0].kernels:
            return None
        try:  # the tracer's description: the candidate's process wrote it, so any number in it may be absurd
            return self._fit(described[0], ref, target)
        except Exception:
            return None

    def _fit(self, described, ref: ReferenceData, target: str) -> Fit:
        est = self.platform.estimate(described.kernels, described.chip, target,
                                     reference_flops=ref.matmul_floor, ideal_f32_passes=ref.needed_passes)
        worst = max(est.kernels, key=lambda k: k.vmem_bytes / max(k.vmem_limit_bytes, 1))
        fits = self.platform.fits(est)
        reason = (f"{worst.name}'s blocks need {worst.vmem_bytes / 2**20:.1f} MiB of {self.platform.memory_name}, "
                  f"{'within' if fits else 'over'} {self.platform.memory_headroom:.0%} of its "
                  f"{worst.vmem_limit_bytes / 2**20:.{self.platform.limit_digits}f} MiB limit (cost-model estimate)")
        return Fit(fits, worst.vmem_bytes, worst.vmem_limit_bytes, reason)

    def check(self, task: Task, target: str, ref: ReferenceData, traced: messages.Decoded) -> JobOutcome:
        """Run the checker on the programs a tracer traced (their jaxprs), with the reference's input sets."""
        programs = sorted(traced.read("jaxpr"), key=lambda m: (m[0].again, m[0].size))
        job = CheckJob(platform=self.platform.spec, target=target,
                       programs=[ProgramSlot(size=p.size, again=p.again) for p, _ in programs],
                       sets=[SetSlot(n_inputs=s["n_inputs"], size=s["size"]) for s in ref.sets],
                       reference_work=ref.program_work, atol=task.atol, rtol=task.rtol,
                       input_shapes=[ref.full_shapes, *(size["shapes"] for size in ref.check_sizes)])
        arrays = [payload[0] for _, payload in programs] + [a for set_inputs in ref.inputs for a in set_inputs]
        return self.pool.run_checker(job, arrays)


def evaluator_from_settings(settings, platform: Platform, check_target) -> Evaluator:
    """An evaluator for ``platform`` configured by the ``[eval]`` section; ``check_target`` refuses a target the
    backend does not know, with its choices."""
    from ..settings import eval_settings

    ev = eval_settings(settings)
    limits = Limits(timeout_s=ev.timeout_s, memory_mb=ev.memory_mb, device=ev.device, platform=platform.spec)
    return Evaluator(limits, check_target=check_target, fresh_inputs=max(ev.fresh_inputs, 0), spares=max(ev.spares, 0),
                     reference_timeout_s=ev.reference_timeout_s, reference_compile_timeout_s=ev.reference_compile_timeout_s,
                     references_at_once=max(ev.references_at_once, 1), home=store_home(settings),
                     reference_cache=ev.reference_cache)


def store_home(settings) -> Path:
    """The run store's folder the settings name (``store.home``), else the default one."""
    return default_home(settings.store.home if settings is not None else None)


def _failed_at_check_size(ev: Evaluation) -> bool:
    """Refused by the CPU check at the check size (wrong values there, or not tracing there), nothing else."""
    failed = next((c for c in ev.checks if not c.passed), None)
    if failed is None or ev.status not in (EvalStatus.INCORRECT, EvalStatus.COMPILE_ERROR):
        return False
    return failed.name == "correctness" or (failed.name == "trace" and bool(failed.details.get("size")))
