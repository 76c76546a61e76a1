"""The records that flow between the core, the sub-agent roles and the plugins.

All are attrs classes, frozen so that a record handed to a hook cannot be
changed behind the caller's back (``attrs.evolve`` makes a modified copy).
Every record round-trips through JSON with :func:`maxkernel_core.serialize.to_json`
and :func:`~maxkernel_core.serialize.from_json`; the stored JSON names the record
type and its schema version so that old run stores stay readable.
"""

from __future__ import annotations

import enum
import time
import uuid
from typing import Any

from attrs import field, frozen


def new_id(prefix: str) -> str:
    """A short, sortable-enough unique id such as ``cand-1f3a9c2b7d10``."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _now() -> float:
    return time.time()


#: Record classes by name, for JSON round-trips. A class's ``__schema_version__``
#: (default 1) is bumped when its fields change incompatibly; ``from_json``
#: refuses a newer version than it knows instead of misreading it.
RECORD_TYPES: dict[str, type] = {}


def record(cls):
    """Register a record class for JSON round-trips under its class name."""
    if RECORD_TYPES.setdefault(cls.__name__, cls) is not cls:
        raise TypeError(f"two record classes are named {cls.__name__}")
    return cls


def schema_version(cls: type) -> int:
    return getattr(cls, "__schema_version__", 1)


@record
@frozen
class Task:
    """A kernel task: a reference computation to beat, with its tolerances.

    ``path`` is the folder or module the task was loaded from; ``format`` names
    the on-disk format (``maxkernel`` or ``jaxbench``); ``sizes`` lists the input
    sizes the task offers (``full`` always, ``small`` for CPU correctness runs).
    """

    id: str
    backend: str
    path: str
    description: str = ""
    format: str = "maxkernel"
    sizes: tuple[str, ...] = ("full",)
    dtype: str = ""
    atol: float | tuple[float, ...] = 1e-5
    rtol: float | tuple[float, ...] = 1e-5
    metadata: dict[str, Any] = field(factory=dict)


@record
@frozen
class Plan:
    """A planner's decision: prose for the implementer plus structured choices.

    ``decisions`` holds the named choices (``tiling``, ``memory``, ``pipelining``,
    ``grid``, ``fusion`` ...); ``parameters`` the concrete values (block sizes).
    """

    task_id: str
    summary: str
    decisions: dict[str, Any] = field(factory=dict)
    parameters: dict[str, Any] = field(factory=dict)
    id: str = field(factory=lambda: new_id("plan"))
    author: str = ""


@record
@frozen
class Provenance:
    """Who made a candidate and how: role, provider/model, the idea applied."""

    role: str = ""
    provider: str = ""
    model: str = ""
    strategy: str = ""
    transformation: str = ""
    plan_id: str | None = None
    llm_call_ids: tuple[int, ...] = ()


@record
@frozen
class Parameter:
    """One tunable of a candidate: a module-level constant ``name`` and the values it may legally take.

    ``values`` are in order (smallest block first), so a move to a neighbouring value is a step in it.
    """

    name: str
    values: tuple[int, ...]


@record
@frozen
class ParameterSpace:
    """The parameters a candidate's author declares tunable, with their legal values.

    Each is a module-level ``NAME = <int>`` line of the candidate's code; a strategy moves a candidate
    to another point of its space by rewriting exactly those lines. Whoever wrote the candidate knows its
    space (the offline synthesizer by construction); a candidate without one is searched by the generic
    rule of the strategies (block-size-like constants, doubled and halved).
    """

    parameters: tuple[Parameter, ...] = ()

    def values_of(self, name: str) -> tuple[int, ...]:
        return next((p.values for p in self.parameters if p.name == name), ())

    def contains(self, point: dict[str, Any]) -> bool:
        """Whether every declared parameter named in ``point`` has a legal value there."""
        return all(point[p.name] in p.values for p in self.parameters if p.name in point)


@record
@frozen
class Move:
    """A proposed step through a candidate's parameter space: ``parameters`` is the whole new point."""

    label: str
    parameters: dict[str, Any]
    note: str = ""


@record
@frozen
class Decline:
    """A role's answer that it has nothing to offer (no plan left, no fix), with the reason.

    Returned from a firstresult role hook it ends the call (no later implementation is asked): an author
    that answers a role itself says so instead of passing the role to a prompt-based fallback.
    """

    reason: str


@record
@frozen
class Candidate:
    """One kernel attempt: the whole module source, the parameters it sets and the space they live in."""

    task_id: str
    code: str
    parameters: dict[str, Any] = field(factory=dict)
    parent_id: str | None = None
    provenance: Provenance = field(factory=Provenance)
    id: str = field(factory=lambda: new_id("cand"))
    created_at: float = field(factory=_now)
    space: ParameterSpace | None = None


class EvalStatus(enum.StrEnum):
    """Outcome of the evaluation cascade; only ``OK`` means the kernel may be used."""

    OK = "ok"
    REJECTED = "rejected"
    COMPILE_ERROR = "compile_error"
    INCORRECT = "incorrect"
    #: passed every check that could run, but correctness could not be checked (no size small enough for
    #: the machine): never ok, never incorrect
    UNVERIFIED = "unverified"
    TIMEOUT = "timeout"
    CRASHED = "crashed"


@record
@frozen
class CheckResult:
    """One step of the evaluation cascade (load, proof of kernel, compile, ...)."""

    name: str
    passed: bool
    message: str = ""
    details: dict[str, Any] = field(factory=dict)
    seconds: float = 0.0


@record
@frozen
class TestReport:
    """The tester role's verdict on correctness over several input sets."""

    __test__ = False  # not a pytest test class, despite the name

    candidate_id: str
    passed: bool
    input_sets: int = 0
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    message: str = ""
    details: dict[str, Any] = field(factory=dict)


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


@record
@frozen
class CompileError:
    """Why the compiler refused a candidate: ``kind`` is a stable class of failure a debugger can branch on
    (``vmem_overflow``, ``lowering``, ``unsupported``, ...), ``message`` the compiler's words."""

    kind: str
    message: str
    line: int | None = None


@record
@frozen
class Fit:
    """Whether a candidate's blocks fit on-chip memory, said before any compile (a backend's static check)."""

    fits: bool
    needed_bytes: int | None = None
    limit_bytes: int | None = None
    reason: str = ""


@record
@frozen
class Evaluation:
    """The judge's verdict on a candidate: status, a reason a model can act on, each check.

    ``profile`` is the speed that stands for a verified kernel (measured on the device, or the labelled
    estimate); ``estimate`` is the cost model's view whatever the verdict (a debugger reads its
    ``fits_memory``); ``compile_error`` is set when the compiler refused it. ``details`` is for display.
    """

    candidate_id: str
    status: EvalStatus
    reason: str = ""
    checks: tuple[CheckResult, ...] = ()
    details: dict[str, Any] = field(factory=dict)
    test: TestReport | None = None
    profile: Profile | None = None
    target: str = ""
    created_at: float = field(factory=_now)
    estimate: Profile | None = None
    compile_error: CompileError | None = None
    #: the OS sandbox that ran the candidate, as the backend names it ("bwrap", "fallback"; "" when unknown)
    sandbox: str = ""
    #: "run-id/candidate-id" of the evaluation whose verdict this is, when identical code was judged before
    #: under the same judge (not counted against the budget); "" for a verdict made for this candidate
    reused_from: str = ""
    #: sha256 of the program this verdict is about, as the backend delivers it beside the source
    #: (``Backend.deliverables``): what was proven, compiled and (on a chip) measured; "" when there is none
    artifact: str = ""

    @property
    def ok(self) -> bool:
        return self.status is EvalStatus.OK


@record
@frozen
class SearchNode:
    """A node of a search graph: one candidate, where it sits, how it scored."""

    run_id: str
    candidate_id: str
    parent_id: str | None = None
    depth: int = 0
    score: float | None = None
    in_beam: bool = False
    id: str = field(factory=lambda: new_id("node"))


@record
@frozen
class SearchEdge:
    """A transformation from one node to another (an optimization idea or a parameter move)."""

    run_id: str
    parent_id: str
    child_id: str
    transformation: str
    description: str = ""


@record
@frozen
class RunConfig:
    """What one run was asked to do: the resolved settings a strategy works under."""

    task: str
    strategy: str = "auto"
    provider: str = "synthesizer"
    model: str | None = None
    backend: str = "tpu_pallas"
    target: str = "v5e"
    budget: int | None = None
    seed: int = 0
    options: dict[str, Any] = field(factory=dict)
    #: debugger attempts per failed candidate (``llm.debug_attempts``)
    debug_attempts: int = 6
    #: the tuned-config table: "use" (start from a matching entry, keep a new best), "refresh" (search anew,
    #: keep the best), "off" (neither read nor write)
    tuned: str = "use"
    #: wall-clock seconds after which the run starts no new evaluation (None: no limit); a bench's per-task limit
    time_limit_s: float | None = None


@record
@frozen
class Attempt:
    """A candidate with its verdict: the unit of history that roles learn from."""

    candidate: Candidate
    evaluation: Evaluation


@record
@frozen
class TunedConfig:
    """A verified best kernel kept for every later task with the same key (operator, shapes, chip, versions).

    ``key`` is the backend's (:meth:`~maxkernel_core.interfaces.Backend.tuning_key`): e.g. the reference's
    jaxpr fingerprint, its input shapes and dtypes, the target and the compiler versions. A key that differs
    in anything, a jax version included, is a miss.
    """

    key: dict[str, str]
    task_id: str
    code: str
    parameters: dict[str, Any] = field(factory=dict)
    seconds: float | None = None
    #: whether ``seconds`` is the cost model's estimate (else measured on the device)
    estimated: bool = True
    speedup: float | None = None
    run_id: str = ""
    candidate_id: str = ""
    strategy: str = ""
    created_at: float = field(factory=_now)
