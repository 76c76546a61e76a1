"""The jobs the evaluator hands its sandboxed workers, one record per kind: what each job module reads is a field
here, not a key someone may misspell on either side of the pipe.

A job travels as its message's JSON header (``encode``: its kind and its fields, unstructured by cattrs); the
worker decodes it (``decode``) before it runs one, so a job that lacks a field or names an unknown kind is
refused in one line before any job code runs. Jobs go one way only, from the judge to its workers: a worker's
answers are the messages the verdict reads.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import cattrs
from attrs import frozen

#: a task's tolerance: one for every output, or one per output
Tolerance = float | tuple[float, ...]

_converter = cattrs.Converter(forbid_extra_keys=True)
_converter.register_structure_hook(
    Tolerance, lambda v, _t: tuple(float(x) for x in v) if isinstance(v, (list, tuple)) else float(v))


class JobError(ValueError):
    """A header that is not a job of a known kind with the fields that kind has."""


class _Wire:
    """What the pool asks of a job, whatever its kind (the sandbox knows no kind)."""

    KIND: ClassVar[str]

    def header(self) -> dict[str, Any]:
        return encode(self)

    def with_scratch(self, scratch: str):
        """The job with the folder its worker may write (known only once the pool has picked the worker)."""
        return attrs.evolve(self, scratch=scratch)


@frozen(kw_only=True)
class ReferenceJob(_Wire):
    """The task's own code (trusted): trace and run its reference, draw the input sets, count its work."""

    KIND: ClassVar[str] = "reference"
    platform: str
    #: the task's metadata, the task format's own record (module, entry, sizes, inputs)
    task: dict[str, Any]
    target: str
    #: "small" or "full": the size the correctness sets are drawn at
    size: str
    #: input sets beyond the first, drawn afresh
    fresh: int
    #: a full-size set over this is drawn at a size the judge derives instead
    max_full_input_bytes: int
    #: whether the reference is also put on the chip, run and timed there
    device: bool = False
    compile_timeout_s: float | None = None
    atol: Tolerance = 0.0
    rtol: Tolerance = 0.0
    #: the gentler re-check's budget for a derived set (None: the usual one)
    small_set_bytes: int | None = None
    scratch: str = ""


@frozen(kw_only=True)
class TraceJob(_Wire):
    """A candidate (untrusted): import it in a fresh sandbox and trace its program at every size."""

    KIND: ClassVar[str] = "trace"
    platform: str
    target: str
    full_shapes: list[dict[str, Any]]
    static_full: Any
    #: the other sizes' shapes and static arguments (the check sets')
    check_sizes: list[dict[str, Any]]
    entry: str = "computation"
    #: how a KernelBench-style module's entry is wrapped ("" for a plain one)
    wrap: str = ""
    #: a fit check: trace the full size and describe its kernels, nothing else
    describe_only: bool = False
    scratch: str = ""


@frozen(kw_only=True)
class ProgramSlot:
    """Where one traced program sits among a check job's arrays: its size (0 full), or the second full trace."""

    size: int
    again: bool = False


@frozen(kw_only=True)
class SetSlot:
    """One input set among a check job's arrays: how many inputs it has, and the size it is drawn at."""

    n_inputs: int
    size: int


@frozen(kw_only=True)
class CheckJob(_Wire):
    """The checker: read the traced programs (no candidate code), prove their work, compile, check every set."""

    KIND: ClassVar[str] = "check"
    platform: str
    target: str
    programs: list[ProgramSlot]
    sets: list[SetSlot]
    #: the reference's work per size (0 = full), counted as a candidate's is
    reference_work: list[dict[str, Any]]
    #: per size (0 = full), the task's dynamic inputs there (``{"shape", "dtype"}`` each): a program the tracer
    #: sent must take exactly these
    input_shapes: list[list[dict[str, Any]]] = []
    atol: Tolerance = 0.0
    rtol: Tolerance = 0.0
    scratch: str = ""


@frozen(kw_only=True)
class DeviceReferenceJob(_Wire):
    """Put a task's exported reference on the chip (its inputs and XLA's program), run and time it there."""

    KIND: ClassVar[str] = "device_reference"
    platform: str
    key: str
    n_inputs: int
    #: put back for a check after the device worker let it go: not timed or judged again
    restore: bool = False
    #: with ``restore``: whether the highest-precision reference ran when the task was first held (one that could
    #: not is not brought back: its outputs would be asked for on the fresh set)
    arbiter: bool = True
    scratch: str = ""


@frozen(kw_only=True)
class DeviceCheckJob(_Wire):
    """Run a checked candidate's full-size program on the chip against the reference held there, and time it."""

    KIND: ClassVar[str] = "device_check"
    platform: str
    key: str
    atol: float
    rtol: float
    scratch: str = ""


Job = ReferenceJob | TraceJob | CheckJob | DeviceReferenceJob | DeviceCheckJob
KINDS: dict[str, type] = {cls.KIND: cls for cls in (ReferenceJob, TraceJob, CheckJob, DeviceReferenceJob,
                                                   DeviceCheckJob)}


def encode(job: Job) -> dict[str, Any]:
    """The job as a message header: its kind and its fields."""
    return {"kind": job.KIND, **_converter.unstructure(job)}


def decode(header: dict[str, Any]) -> Job:
    """The job a header holds (``JobError`` when it is not one); the protocol's own keys are not its fields."""
    cls = KINDS.get(header.get("kind"))
    if cls is None:
        raise JobError(f"unknown job kind {header.get('kind')!r}")
    fields = {k: v for k, v in header.items() if k not in ("kind", "arrays")}
    try:
        return _converter.structure(fields, cls)
    except Exception as exc:  # cattrs' grouped errors: one line says what the header got wrong
        raise JobError(f"not a {cls.KIND} job: {'; '.join(cattrs.transform_error(exc)) or exc}") from None
