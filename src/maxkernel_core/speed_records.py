"""The records of a speed: the profiler role's figure of a candidate (``Profile``), what a measured time
achieves (``Achieved``), and the one speed record every report words the same way (``Speed``). How a model
reached an estimate is a ``ModelBreakdown`` inside the figure (``model_records.py``)."""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

from .model_records import ModelBreakdown
from .record_base import record


@record
@frozen
class Profile:
    """The profiler role's performance view of a candidate.

    ``estimated`` is True for a cost-model figure and False only for time
    measured on the device; reports must never present one as the other.
    """

    candidate_id: str
    source: str
    estimated: bool
    seconds: float | None = None
    reference_seconds: float | None = None
    bound: str = ""
    diagnosis: tuple[str, ...] = ()
    details: dict[str, Any] = field(factory=dict)
    #: share of the roofline's floor (every byte once, every FLOP at peak) the kernel reaches
    roofline_fraction: float | None = None
    arithmetic_intensity: float | None = None
    #: whether the kernels' blocks fit on-chip memory (None: not known)
    fits_memory: bool | None = None
    #: what the reference time stands for, in a sentence (e.g. the matmul precision XLA's reference runs at,
    #: which is why an f32 matmul can read below 1x); the run's closing line and report print it
    reference_note: str = ""
    #: how an estimate was made, in a clause the speed sentence quotes ("the program was compiled for v6e and
    #: modelled, not run on one"); empty: that default
    estimate_basis: str = ""
    #: what the reference time is, in the sentence's words ("XLA's own compilation of the task's reference")
    reference_basis: str = ""
    #: the chip the figure is for: the device measured ("TPU v5 lite") or the target modelled ("v5e")
    chip: str = ""
    #: whether the reference time was measured; None: of the same kind as ``seconds``
    reference_measured: bool | None = None
    #: how wrong the model has been against measurements on this chip, in a clause (estimates only)
    accuracy: str = ""
    #: what a measured time achieves for the task's work (measurements only)
    achieved: Achieved | None = None
    #: how the cost model reached its estimate: the figure's own, or, beside a measurement, the model's reading
    model: ModelBreakdown | None = None

    @property
    def speedup(self) -> float | None:
        """Reference time over this time, only when both are of one kind (never measured over estimated)."""
        return self.speed.ratio if self.seconds else None

    @property
    def speed(self) -> Speed:
        """This figure as the one speed record every report words the same way (``maxkernel_core.speed``)."""
        return Speed(self.seconds or 0.0, not self.estimated, self.chip, self.source, self.reference_seconds,
                     (not self.estimated) if self.reference_measured is None else self.reference_measured,
                     self.reference_basis, self.reference_note, self.estimate_basis, self.accuracy)


@record
@frozen
class Achieved:
    """What a measured time achieves for the task's work: its TFLOP/s, the HBM GB/s of at least its inputs and
    outputs once, and the share of the chip's roofline (its floor for that work over the time; above 1, the
    time is shorter than the chip allows)."""

    tflops: float | None = None
    hbm_gbs: float | None = None
    roofline_fraction: float | None = None


@record
@frozen
class Speed:
    """One speed figure: its time, measured or estimated, on which chip, from what source, and the reference
    it is held against. A ratio exists only between two figures of one kind: a measured kernel is never
    divided by an estimated reference, nor the other way round. ``maxkernel_core.speed`` words it."""

    seconds: float
    measured: bool
    chip: str = ""
    #: where the figure comes from ("device_trace": profiler traces on the chip; "cost_model": the model)
    source: str = ""
    reference_seconds: float | None = None
    reference_measured: bool = False
    #: what the reference is ("XLA's own compilation of the task's reference"); empty: that default
    reference: str = ""
    #: a sentence on the reference (the precision XLA runs it at)
    note: str = ""
    #: how an estimate was made ("the program was compiled for v6e and modelled, not run on one")
    basis: str = ""
    #: how wrong the model has been against measurements (estimates only)
    accuracy: str = ""

    @property
    def kind(self) -> str:
        return "measured" if self.measured else "estimated"

    @property
    def comparison(self) -> str:
        """"measured/measured", "estimated/estimated", or the mixed kinds that give no ratio."""
        if self.reference_seconds is None:
            return self.kind
        return f"{self.kind}/{'measured' if self.reference_measured else 'estimated'}"

    @property
    def ratio(self) -> float | None:
        """The reference's time over this one (above 1: faster than the reference); None across kinds."""
        if not (self.seconds and self.reference_seconds) or self.measured != self.reference_measured:
            return None
        return self.reference_seconds / self.seconds
