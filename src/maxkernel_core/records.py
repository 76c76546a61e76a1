"""The records that flow between the core, the sub-agent roles and the plugins.

All are attrs classes, frozen so that a record handed to a hook cannot be
changed behind the caller's back (``attrs.evolve`` makes a modified copy).
Every record round-trips through JSON with :func:`maxkernel_core.serialize.to_json`
and :func:`~maxkernel_core.serialize.from_json`; the stored JSON names the record
type and its schema version so that old run stores stay readable.
"""

from __future__ import annotations

import enum
from typing import Any

from attrs import field, frozen

# re-exported: every record is importable from here, as before the speed records had a module of their own
from .record_base import RECORD_TYPES, _now, new_id, record, schema_version  # noqa: F401
from .speed_records import Achieved, Profile, Speed  # noqa: F401


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
    #: the backend's own description of the task's files, for the backend alone: no other package reads it
    metadata: dict[str, Any] = field(factory=dict)
    #: what a reader of the task's results should know (a legitimate shortcut its reference allows, say)
    notes: str = ""


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
    #: the idea applied, in words for a person (a plan's move, "autotune: BLOCK_M 128 -> 256"); never parsed
    transformation: str = ""
    plan_id: str | None = None
    llm_call_ids: tuple[int, ...] = ()
    #: a strategy's re-evaluation of a kernel it is about to declare best, counted apart from the budget
    recheck: bool = False


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
