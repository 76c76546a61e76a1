"""What a worker may say to the judge, one record per kind of message: every header that comes back is held to
its record before the verdict reads it.

The tracer is the candidate's own process, and the candidate can write on its results pipe as the tracer does
(the pipe's descriptor is in its process). So a header is decoded here, in the parent, into its record
(cattrs: the fields the verdict reads, present and of their type), and the messages that a job sends at most
once (a load, an integrity or a trace check, a program per size, a set's outputs) must come once: a second one
is a message the candidate wrote. A job whose messages fail either rule gets a verdict from that alone (the
tracer's: rejected; a worker of the judge's own: crashed), never an exception in the judge.
"""

from __future__ import annotations

import math
from typing import Any

import cattrs
from attrs import frozen

from ..sandbox.records import JobOutcome

_converter = cattrs.Converter()


def _strict(kind: type, also: tuple[type, ...] = ()):
    """A value already of its type (cattrs would convert: ``int("7")``, ``str(1)``), never a bool for a number."""
    def structure(value, _type):
        if isinstance(value, bool) and kind is not bool or not isinstance(value, (kind, *also)):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
        return value
    return structure


for _kind, _also in ((int, ()), (float, (int,)), (str, ()), (bool, ())):
    _converter.register_structure_hook(_kind, _strict(_kind, _also))


@frozen(kw_only=True)
class ErrorInfo:
    """An exception a job caught: the candidate's (at import, trace, a set's run) or the compiler's."""

    type: str
    message: str
    line: int | None = None
    #: the compiler error's class (``errors.trim_error``: compile, vmem_overflow, block_shape)
    kind: str | None = None
    #: the installed jax's alternative to a name or signature the candidate used (``api_drift``)
    hint: str = ""
    traceback: str = ""

    def as_details(self) -> dict[str, Any]:
        """The error as a check's details keep it: what was said, nothing a sender left out."""
        return {k: v for k, v in _converter.unstructure(self).items()
                if k in ("type", "message", "line") or v not in (None, "")}


@frozen(kw_only=True)
class GlueDot:
    """A matmul outside the kernels, as the work count names it."""

    shape: str
    flops: float
    times: float  # the proof reads it from the header itself: no default stands in for it
    owned: bool = False


@frozen(kw_only=True)
class WorkCount:
    """The work count the proof of kernel reads (``judge/work.py``, ``hlo_work.py``): what the verdict reads of
    it must be there, whoever counted (the tracer's count may only refuse)."""

    pallas_calls: int
    callbacks: list[str]
    glue_flops: float
    glue_elementwise: float
    glue_dots: list[GlueDot] = []
    glue_ops: dict[str, float] = {}
    unbounded_loops: int = 0
    #: ops the checker's count cannot account for outside kernels: the proof refuses any
    unknown_ops: dict[str, int] = {}
    kernel_flops: float = 0
    #: the checker's count (``hlo_work``): each kernel's name, repeat, matmul FLOPs and operand types
    kernels: list[dict[str, Any]] = []
    #: the tracer's jaxpr-level count (``work.py``): per kernel, its grid steps and the model's VMEM bytes
    kernel_elementwise: float = 0
    grid_steps: list[float] = []
    vmem_bytes: list[float] = []

    def for_proof(self) -> dict[str, Any]:
        """The fields ``proof.verdict`` reads, as plain values: never the free-form ones (``kernels``), which a
        tracer's count could nest past any recursion limit."""
        return {"pallas_calls": self.pallas_calls, "callbacks": list(self.callbacks), "glue_flops": self.glue_flops,
                "glue_elementwise": self.glue_elementwise, "glue_ops": dict(self.glue_ops),
                "unbounded_loops": self.unbounded_loops, "unknown_ops": dict(self.unknown_ops),
                "glue_dots": [plain(d) for d in self.glue_dots]}  # a GlueDot is flat: its four fields

    def finite(self) -> bool:
        """Every count the proof computes with is a finite number (JSON's Infinity and NaN parse as floats)."""
        numbers = [self.glue_flops, self.glue_elementwise, self.kernel_flops, *self.glue_ops.values(),
                   *(x for d in self.glue_dots for x in (d.flops, d.times))]
        return all(isinstance(x, int) or math.isfinite(x) for x in numbers)  # an int is finite, however large


@frozen(kw_only=True)
class LoadCheck:
    ok: bool
    error: ErrorInfo | None = None


@frozen(kw_only=True)
class IntegrityCheck:
    ok: bool
    patched: list[str]
    when: str


@frozen(kw_only=True)
class TraceCheck:
    ok: bool
    size: int = 0
    work: WorkCount | None = None
    leftovers: list[str] = []
    patched: list[str] = []
    error: ErrorInfo | None = None


@frozen(kw_only=True)
class LoweringCheck:
    """An export (the tracer's) or a compile (the checker's): ok, or the compiler's error."""

    ok: bool
    size: int = 0
    #: 0 where the sender did not time it (the tracer's export): a check's seconds are stored as a number
    seconds: float = 0.0
    error: ErrorInfo | None = None
    #: a compile's figures (the platform's ``compile_exported``): the device, its memory and cost analyses,
    #: the compiled program's ops (the code around the kernels), and the sentence a platform says instead
    device_kind: str | None = None
    memory: dict[str, Any] | None = None
    cost: dict[str, float] | None = None
    program: dict[str, Any] | None = None
    summary: str | None = None
    lowered_only: bool = False


@frozen(kw_only=True)
class Program:
    """A traced program (its bytes are the one array): the size it was traced at, or the full size again."""

    size: int
    again: bool = False


@frozen(kw_only=True)
class Kernels:
    kernels: list[dict[str, Any]] = []
    chip: dict[str, Any] | None = None
    error: str | None = None


@frozen(kw_only=True)
class Refused:
    why: str


@frozen(kw_only=True)
class Work:
    work: WorkCount
    size: int = 0


@frozen(kw_only=True)
class Canonical:
    size: int


@frozen(kw_only=True)
class Outputs:
    index: int
    error: ErrorInfo | None = None


@frozen(kw_only=True)
class WorkerError:
    message: str
    kind: str | None = None


@frozen(kw_only=True)
class Done:
    retire: bool = False


_CHECKS = {"load": LoadCheck, "integrity": IntegrityCheck, "trace": TraceCheck, "export": LoweringCheck,
           "compile": LoweringCheck}
_KINDS = {"jaxpr": Program, "kernels": Kernels, "refused": Refused, "traced_work": Work, "work": Work,
          "canonical": Canonical, "outputs": Outputs, "error": WorkerError, "done": Done}
#: kinds (and checks) a job sends at most once, keyed by what tells two apart
_ONCE = {("check", "load"): (), ("check", "integrity"): (), ("check", "trace"): (), ("check", "export"): (),
         ("jaxpr",): ("size", "again"), ("work",): ("size",), ("canonical",): ("size",), ("outputs",): ("index",),
         ("refused",): (), ("traced_work",): (), ("kernels",): (), ("done",): ()}


#: kinds a worker sends that carry nothing the verdict reads: the worker's start, the parent's own note of garbage
_BARE = frozenset({"ready", "protocol_error"})


def decode(header: dict[str, Any]) -> Any:
    """The record a header holds; ``ValueError`` (one line) when it is not a well-formed message of its kind,
    or of no kind a tracer or checker sends (None for the bare ones)."""
    kind, name = header.get("type"), header.get("name")
    if kind in _BARE:
        return None
    if not isinstance(kind, str) or kind == "check" and not isinstance(name, str):
        raise ValueError("a message whose type or check name is not a string")
    cls = _CHECKS.get(name) if kind == "check" else _KINDS.get(kind)
    if cls is None:
        raise ValueError(f"a message of no kind the judge reads ({kind} {name or ''})".replace(" )", ")"))
    fields = {k: v for k, v in header.items() if k not in ("type", "name", "arrays")}
    what = f"{kind} {header.get('name')}" if kind == "check" else kind
    record = structure(fields, cls, what)
    missing = _missing(record)
    if missing:
        raise ValueError(f"a malformed {what} message ({missing})")
    return record


def structure(fields: dict[str, Any], cls: type, what: str) -> Any:
    """``fields`` as a ``cls`` by the strict converter; ``ValueError`` (one line) naming ``what`` when they are not
    one (the device worker's messages are read the same way: ``device_messages.py``)."""
    try:
        return _converter.structure(fields, cls)
    except Exception as exc:
        raise ValueError(f"a malformed {what} message ({'; '.join(cattrs.transform_error(exc)) or exc})") from None


def _missing(record: Any) -> str:
    """What a well-typed record still lacks that its kind's verdict reads (a pass with no count, a failure
    with no error, a count that is not a number)."""
    work = getattr(record, "work", None)
    if isinstance(work, WorkCount) and not work.finite():
        return "a work count that is not finite"
    if isinstance(record, LoweringCheck) and not math.isfinite(record.seconds):
        return "a compile time that is not finite"
    if isinstance(record, TraceCheck) and record.ok and record.work is None:
        return "a trace that passed with no work count"
    if isinstance(record, (LoadCheck, LoweringCheck)) and not record.ok and record.error is None:
        return "a failure with no error"
    if isinstance(record, IntegrityCheck) and not record.ok and not record.patched:
        return "an integrity failure that names nothing patched"
    return ""


def plain(record: Any) -> Any:
    """A record as the plain values the proof and the stored details read (every field, none a sender added)."""
    return _converter.unstructure(record)


@frozen
class Decoded:
    """An outcome's messages, each decoded once into its record (:func:`decoded`): what the verdict reads, in
    the order sent, never a header's keys."""

    outcome: JobOutcome
    #: (type, check name or None, record, arrays) per message
    entries: tuple[tuple[str, str | None, Any, list], ...]

    def read(self, kind: str) -> list[tuple[Any, list]]:
        """Every ``kind`` message as (its record, its arrays)."""
        return [(record, arrays) for sent, _, record, arrays in self.entries if sent == kind]

    def last(self, kind: str) -> tuple[Any, list] | None:
        """The last ``kind`` message as (record, arrays), or None."""
        found = self.read(kind)
        return found[-1] if found else None

    def checks(self, *names: str) -> list[tuple[str, Any]]:
        """The check messages named ``names`` (every check when none), as (name, record)."""
        return [(name, record) for sent, name, record, _ in self.entries
                if sent == "check" and (not names or name in names)]


def decoded(outcome: JobOutcome) -> Decoded | str:
    """``outcome``'s messages, each decoded once, or why they are not what a job of the judge sends (malformed,
    or twice what comes once), in a sentence."""
    seen: set[tuple] = set()
    entries = []
    for header, arrays in outcome.messages:
        try:
            record = decode(header)
        except Exception as exc:  # whatever a header holds, the answer is a sentence, never an exception here
            return (str(exc) if isinstance(exc, ValueError) else f"a message the judge cannot read ({exc})")[:300]
        key = (header["type"], header.get("name")) if header["type"] == "check" else (header["type"],)
        if key in _ONCE:
            once = (key, *(repr(header.get(field)) for field in _ONCE[key]))
            if once in seen:
                return f"a second {' '.join(str(k) for k in key)} message where a job sends one"
            seen.add(once)
        entries.append((header["type"], header.get("name") if header["type"] == "check" else None, record, arrays))
    return Decoded(outcome, tuple(entries))
