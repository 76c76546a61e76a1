"""What the device worker may say to the judge, one record per kind of message (``device_job.py`` sends them;
``chip_host.py`` and ``chip_verdict.py`` read the records, never the headers).

The device worker runs no candidate Python, only programs the checker proved, so its messages are not a
candidate's words as the tracer's can be; they are still held to their records (``messages.py``'s strict
``structure``), so that what the verdict reads is there and of its type, and a malformed one is a crashed worker
in one line, never an exception in the judge.
"""

from __future__ import annotations

import math
from typing import Any

from attrs import frozen

from ..sandbox.records import JobOutcome
from .messages import ErrorInfo, structure


@frozen(kw_only=True)
class DeviceTiming:
    """One measurement on the chip (``timing.py``): the median device time of the timed calls and what it is of."""

    median_s: float
    times_s: list[float]
    wall_median_s: float
    runs: int
    warmup: int
    input_sets: int
    #: (op name, device seconds per call), the costliest first
    top_ops: list[tuple[str, float]] = []
    #: the share of the device time spent in DMA or semaphore waits
    wait_share: float = 0.0


@frozen(kw_only=True)
class DeviceReference:
    """A task's reference held on the chip: XLA's measured time there (not when put back for a check), and why
    the highest-precision reference could not run, if it could not."""

    key: str
    device_kind: str
    restored: bool = False
    timing: DeviceTiming | None = None
    n_outputs: int = 0
    exact_error: ErrorInfo | None = None


@frozen(kw_only=True)
class NeedReference:
    key: str


@frozen(kw_only=True)
class ChipOutputs:
    """A candidate's full-size outputs on ``sets`` input sets (its arrays), then XLA's and, with ``exact``, the
    highest-precision reference's on the fresh set; or the error that stopped the program."""

    sets: int = 0
    n_outputs: int = 0
    #: how many outputs the references have (a candidate's count may differ: then it is wrong, not garbled)
    n_reference: int = 0
    exact: bool = True
    error: ErrorInfo | None = None


@frozen(kw_only=True)
class Timed:
    """The candidate's timed calls: the measurement, and how many kept calls differed from its first outputs."""

    ok: bool
    timing: DeviceTiming | None = None
    device_kind: str = ""
    #: required with ``ok``: no default may skip the check that every timed call matched the first
    calls_checked: int | None = None
    calls_differ: int | None = None
    error: ErrorInfo | None = None


_KINDS = {"device_reference": DeviceReference, "need_reference": NeedReference, "chip_outputs": ChipOutputs,
          "timing": Timed}


def last(outcome: JobOutcome, kind: str) -> tuple[Any, list] | None:
    """The record of the device worker's last message of ``kind`` and its arrays, or None when it sent none;
    ``ValueError`` (one line) when the message is not a well-formed one of its kind."""
    found = outcome.last(kind)
    if found is None:
        return None
    header, arrays = found
    fields = {k: v for k, v in header.items() if k not in ("type", "arrays")}
    try:
        record = structure(fields, _KINDS[kind], kind)
    except ValueError as exc:
        raise ValueError(f"the device worker sent {exc}") from None
    why = _invalid(record, len(arrays))
    if why:
        raise ValueError(f"the device worker sent a {kind} message {why}")
    return record, arrays


def _bad_timing(timing: DeviceTiming | None) -> str:
    if timing is None:
        return "without its measurement"
    if not all(math.isfinite(t) and t > 0 for t in (timing.median_s, timing.wall_median_s, *timing.times_s)):
        return "with a time that is not a positive number"
    return "with no timed call" if timing.runs < 1 or not timing.times_s else ""


def _invalid(record: Any, n_arrays: int) -> str:
    """What a well-typed message still gets wrong that the verdict relies on (its counts, its arrays)."""
    if isinstance(record, ChipOutputs) and record.error is None:
        if not 1 <= record.sets <= 2 or record.n_outputs < 0 or record.n_reference < 1:
            return f"with {record.sets} sets of {record.n_outputs} outputs ({record.n_reference} of the references)"
        n, refs = record.n_outputs, record.n_reference
        want = record.sets * n + (refs + refs * record.exact if record.sets == 2 else 0)
        return "" if n_arrays == want else f"with {n_arrays} arrays where its counts say {want}"
    if isinstance(record, Timed) and record.ok:
        if record.calls_checked is None or record.calls_differ is None or not 0 <= record.calls_differ <= record.calls_checked:
            return "without a count of the timed calls checked"
        return _bad_timing(record.timing)
    if isinstance(record, DeviceReference) and not record.restored:
        n = record.n_outputs
        want = 1 + n + (n if record.exact_error is None else 0)
        if n < 1 or n_arrays != want:
            return f"with {n_arrays} arrays for {n} outputs"
        return _bad_timing(record.timing)
    return ""
