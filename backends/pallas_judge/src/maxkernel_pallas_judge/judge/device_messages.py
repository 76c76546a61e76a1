"""What the device worker may say to the judge, one record per kind of message (``device_job.py`` sends them;
``chip_host.py`` and ``chip_verdict.py`` read the records, never the headers).

The device worker runs no candidate Python, only programs the checker proved, so its messages are not a
candidate's words as the tracer's can be; they are still held to their records (``messages.py``'s strict
converter), so that what the verdict reads is there and of its type, and a malformed one is a crashed worker
in one line, never an exception in the judge.
"""

from __future__ import annotations

from typing import Any

import cattrs
from attrs import frozen

from ..sandbox.records import JobOutcome
from .messages import ErrorInfo, converter


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
    exact: bool = True
    error: ErrorInfo | None = None


@frozen(kw_only=True)
class Timed:
    """The candidate's timed calls: the measurement, and how many kept calls differed from its first outputs."""

    ok: bool
    timing: DeviceTiming | None = None
    device_kind: str = ""
    calls_checked: int = 0
    calls_differ: int = 0
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
        record = converter.structure(fields, _KINDS[kind])
    except Exception as exc:
        raise ValueError(f"the device worker sent a malformed {kind} message "
                         f"({'; '.join(cattrs.transform_error(exc)) or exc})") from None
    if isinstance(record, (ChipOutputs,)) and record.error is None and record.sets < 1 \
            or isinstance(record, Timed) and record.ok and record.timing is None \
            or isinstance(record, DeviceReference) and not record.restored and record.timing is None:
        raise ValueError(f"the device worker sent a {kind} message without what it is for")
    return record, arrays
