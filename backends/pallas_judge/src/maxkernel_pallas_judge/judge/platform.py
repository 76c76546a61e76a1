"""The chip a judge judges for: the one seam between the sandboxed one-program judge and a backend.

The judge (the tracer, the checker, the reference job, the verdict) is the
same for every Pallas backend: the candidate's Python runs once, in its own
sandbox, to trace one program; everything judged derives from that program,
in a checker that never imported the candidate. What differs per chip is
here: how the traced program is lowered and exported (Mosaic TPU, Mosaic GPU,
Triton), which custom calls are kernels, how it is compiled and timed on the
device, the chip's figures and the cost model that reads them.

A backend hands its ``Platform`` to the evaluator; workers get it by name
(``spec``, ``"module:ATTRIBUTE"``), set by the parent, never by a candidate.
The parent's side (``attached``, ``device_paths``) must not import JAX.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Any, ClassVar


class Platform:
    """Base of a chip's judge facts; a backend subclasses it (``TpuPlatform``, ``GpuPlatform``)."""

    #: ``jax.default_backend()`` on a host with the chip ("tpu", "gpu"): what a reference's platform reads there
    name: ClassVar[str] = ""
    #: the chip family in sentences ("TPU", "GPU")
    label: ClassVar[str] = ""
    #: the verdict's name for the full-size compile check ("tpu_compile", "gpu_compile")
    compile_check: ClassVar[str] = ""
    #: how workers load this object: "module:ATTRIBUTE"
    spec: ClassVar[str] = ""
    #: the backend's packages and the libraries it lowers with: the tracer watches them for patches as it
    #: watches the judge's own (``tripwire``)
    watched: ClassVar[tuple[str, ...]] = ()
    #: the on-chip memory a kernel's blocks must fit ("VMEM", "shared memory"), the share of its limit they may
    #: take (the compiler keeps its own scratch beside them), and the digits its limit is printed with
    memory_name: ClassVar[str] = "VMEM"
    memory_headroom: ClassVar[float] = 1.0
    limit_digits: ClassVar[int] = 0
    #: how this chip's estimates are made and what XLA's reference time is, for the speed sentence
    #: (``Profile.estimate_basis``, ``Profile.reference_basis``; empty: the core's default wording)
    estimate_basis: ClassVar[str] = ""
    reference_basis: ClassVar[str] = ""

    #: where a profiler trace holds this chip's work: planes named so, and lines ``timing_lines`` accepts
    timing_plane: ClassVar[str] = "/device:"
    #: whether a function named ``maxkernel_kernel_N`` in a device program is a kernel: only where the device
    #: program is the judge's own interpret-mode export (the tests' stand-in chip); a chip's kernels are what
    #: its compiler marks as kernels, never a name a candidate can write
    kernel_functions: ClassVar[bool] = False

    # --- the parent (no JAX) ----------------------------------------------------------

    def found(self):
        """What this chip's runtime reports on this host (``chip_probe.ChipFound``), asked in a child process so
        the parent never holds the chip."""
        from ..chip_probe import found

        return found(self.name, shows_chip=self.shows_chip)

    def shows_chip(self) -> bool:
        """Whether this host shows signs of the chip (its device files): the evidence a "held by another
        process" answer needs, since a runtime's lock can be held on a host with no chip at all."""
        return bool(self.device_paths())

    def attached(self) -> bool:
        """Whether this host has the chip (then the device worker checks and times programs on it)."""
        return self.found().attached

    def attached_target(self) -> str | None:
        """The target the attached chip is (programs are measured only for it); None when none is attached or
        its kind is not one this backend models."""
        return None

    def device_paths(self) -> list[str]:
        """Device files a worker that runs on the chip needs inside its sandbox."""
        return []

    # --- workers ------------------------------------------------------------------------

    def warm_up(self) -> None:
        """Trusted work before a spare's first job (imports, a first compile), so a candidate pays none."""

    def trace_context(self, target: str):
        """The context a candidate is traced in (a TPU's deviceless device, so trace-time chip queries see it)."""
        return contextlib.nullcontext()

    def export(self, closed, target: str) -> bytes:
        """The captured program lowered for ``target``, serialized (``jax.export``); raises the lowering error."""
        raise NotImplementedError

    def kernel_work(self, call_target: str, op) -> dict[str, Any] | None:
        """A custom call's kernel facts (name, matmul_flops per step, steps, grid...) when it is this chip's
        kernel; None when it is not a kernel (then it is glue: a callback unless it is known to be free)."""
        raise NotImplementedError

    def compile_exported(self, exported, target: str) -> dict[str, Any]:
        """Compile a candidate's exported program for ``target``: figures, or ``{"ok": False, "error": ...}``."""
        raise NotImplementedError

    def compile_reference(self, fn, shapes, target: str, source_file: str, *, timeout_s: float | None,
                          precision: str) -> dict[str, Any]:
        """The reference compiled for ``target`` (XLA's figures for its estimate), or why not."""
        raise NotImplementedError

    def chip(self, target: str) -> dict[str, Any]:
        """The target's figures the cost model reads, with their source."""
        raise NotImplementedError

    def semantic_interpreter(self):
        """The interpreter that follows this chip's semantics (DMAs, semaphores, output blocks, bounds) for the
        checker's first input set, or None for Pallas' plain interpreter alone."""
        return None

    def describe_kernels(self, closed) -> list[dict[str, Any]]:
        """The traced program's kernels for the cost model (grid, blocks, body work)."""
        from ..profiling.extract import describe_kernels

        return describe_kernels(closed)

    def reference_precision(self, check_fn, sets, expected, atol: float, rtol: float) -> dict[str, Any]:
        """The matmul precision XLA's reference must run at to pass the task's own check."""
        return {"precision": "default"}

    def timing_lines(self, line: str) -> bool:
        """Whether a trace line of ``timing_plane`` holds this chip's work (every line of a device plane)."""
        return True

    def time_on_device(self, fn, input_sets, *, trace_root, stage=None) -> tuple[dict[str, Any], list]:
        """Median device time of ``fn`` from one profiler trace of calls alternating between ``input_sets``, and
        the outputs of the calls kept for checking (hosts with the chip only; ``timing.py``)."""
        from .timing import time_on_device

        return time_on_device(fn, input_sets, trace_root=trace_root, plane_prefix=self.timing_plane,
                              line_filter=self.timing_lines, stage=stage)

    # --- the parent's speed model ---------------------------------------------------------

    def estimate(self, kernels: list[dict[str, Any]], chip: dict[str, Any], target: str, *,
                 reference_flops: float | None, ideal_f32_passes: float | None):
        """The cost model's ``CostEstimate`` of the described kernels (always labelled an estimate)."""
        raise NotImplementedError

    def with_glue(self, est, program: dict[str, Any] | None):
        """The estimate plus the code the compiled program runs around its kernels."""
        return est

    def xla_estimate(self, xla: dict[str, Any], target: str):
        """The same model's estimate of XLA's reference, from its compile figures; None when it has none."""
        return None

    def fits(self, est) -> bool:
        """Whether every kernel's blocks fit the chip's on-chip memory by the model."""
        return est.fits_vmem

    def diagnose(self, est) -> list[str]:
        """What the estimate says limits the kernels, in sentences to act on."""
        return []

    def breakdown(self, est):
        """The estimate taken apart (``ModelBreakdown``), the record a ``Profile`` carries as its ``model``."""
        from ..profiling.records import as_breakdown

        return as_breakdown(est)

    def profile(self, candidate_id: str, est, xla_seconds: float | None, reference_note: str = ""):
        """The estimate as the one speed figure: the model's time against its time of XLA's reference, its
        diagnosis, and how it reached them (``model``)."""
        from maxkernel_core import Profile

        return Profile(candidate_id, "cost_model", True, est.seconds, xla_seconds, est.bound,
                       tuple(self.diagnose(est)), roofline_fraction=est.roofline_fraction,
                       arithmetic_intensity=est.arithmetic_intensity, fits_memory=est.fits_vmem,
                       reference_note=reference_note, estimate_basis=self.estimate_basis,
                       reference_basis=self.reference_basis, chip=est.target,
                       accuracy=self.estimate_accuracy(est.target), model=self.breakdown(est))

    def estimate_accuracy(self, target: str) -> str:
        """How wrong this chip's estimates have been against measurements, in a clause with its source."""
        return "never held against a measurement on this chip."


_loaded: dict[str, Platform] = {}


def load_platform(spec: str) -> Platform:
    """The platform object named ``module:ATTRIBUTE`` (the parent's choice, passed to each worker)."""
    if not spec:
        raise ValueError("no judge platform: a backend passes its own (Limits(platform=TpuPlatform.spec), ...)")
    if spec not in _loaded:
        module, _, attribute = spec.partition(":")
        platform = getattr(importlib.import_module(module), attribute)
        if not isinstance(platform, Platform):
            raise TypeError(f"{spec} is not a judge Platform")
        _loaded[spec] = platform
    return _loaded[spec]
