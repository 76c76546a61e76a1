"""The parent's side of the device worker: each task's reference held on the chip, and checked programs run
there (``device_job.py`` is the worker's side, ``chip_verdict.py`` judges what comes back).

One lock covers every exchange with the chip, so a check and the reference it needs are never interleaved with
another task's. The chip holds one task at a time; the parent keeps the full-size inputs and programs of the
last ``KEEP_PAYLOADS`` tasks (more when several are judged at once), to put one back on the chip when its turn comes again, and builds a reference
afresh only for a task it let go of.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from pathlib import Path
from collections.abc import Callable
from typing import Any

import numpy as np
from attrs import field, frozen

from ..sandbox.pool import WorkerPool
from ..sandbox.records import JobOutcome
from . import device_messages
from .compare import distance
from .device_messages import DeviceTiming
from .job_records import DeviceCheckJob, DeviceReferenceJob
from .traces import keep_trace

KEEP_PAYLOADS = 2


@frozen
class ChipReference:
    """The reference as the chip ran it: XLA's measured time and outputs there, and the high-precision
    reference's outputs (the arbiter), on the task's own full-size inputs. ``exact_outputs`` is None where the
    arbiter could not run on the chip (``no_arbiter`` says why): a kernel is then right only where it matches
    XLA."""

    key: str
    device_kind: str
    timing: DeviceTiming
    xla_outputs: list[np.ndarray] = field(eq=False, repr=False)
    exact_outputs: list[np.ndarray] | None = field(eq=False, repr=False)
    #: XLA's default-precision outputs against the highest-precision reference's (``compare.distance``)
    xla_vs_exact: dict[str, Any] = field(factory=dict)
    trace: str | None = None
    no_arbiter: str = ""


class ChipHolder:
    """Holds references on the chip and runs checked programs there, for one evaluator."""

    def __init__(self, pool: WorkerPool, platform, timeout_s: float, home: Path, keep: int = KEEP_PAYLOADS) -> None:
        self.pool, self.platform, self.timeout_s, self.home = pool, platform, timeout_s, home
        self.keep = max(keep, KEEP_PAYLOADS)
        self.lock = threading.RLock()
        self._payloads: OrderedDict[str, tuple[int, list[np.ndarray]]] = OrderedDict()

    def hold(self, task, key: tuple, payload) -> tuple[ChipReference | None, str]:
        """Put a task's reference on the chip and time XLA's program there; (None, why) when it cannot run
        there (over the chip's memory, say): the task is then judged as on a host without the chip."""
        header, arrays = payload
        if header.get("type") == "device_payload_error":
            return None, f"not measured: the full-size inputs for the {self.platform.label} failed: {header['message']}"
        chip_key = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
        n_inputs = int(header["n_inputs"])
        with self.lock:
            self._payloads[chip_key] = (n_inputs, list(arrays))
            self._payloads.move_to_end(chip_key)
            while len(self._payloads) > self.keep:
                self._payloads.popitem(last=False)
            outcome = self._send(task, chip_key)
        try:
            done = device_messages.last(outcome, "device_reference")
        except ValueError as exc:
            return None, f"not measured: {exc}"
        if outcome.status != "done" or done is None:
            error = outcome.last("error")
            why = error[0]["message"] if error else (outcome.log_tail or outcome.how_it_ended)[-300:]
            if error and os.environ.get("MAXKERNEL_DEBUG"):
                why += "\n" + error[0].get("traceback", "")
            return None, f"not measured: XLA's reference did not run on the {self.platform.label}: {why[:300]}"
        head, out = done
        if head.restored:  # an answer to a job this was not
            return None, "not measured: the device worker answered a first hold as a restore"
        n = head.n_outputs
        xla, exact = list(out[1:1 + n]), list(out[1 + n:1 + 2 * n])
        kept = keep_trace(f"reference-{task.id}-{chip_key}", out[:1], self.home)
        if head.exact_error is not None:
            why = f"the highest-precision reference did not run on the {self.platform.label}: " \
                  f"{head.exact_error.message[:300]}"
            return ChipReference(chip_key, head.device_kind, head.timing, xla, None, {}, kept, why), ""
        return ChipReference(chip_key, head.device_kind, head.timing, xla, exact,
                             distance(exact, xla, task.atol, task.rtol), kept), ""

    def release(self, keys: list[str]) -> None:
        """Forget these references' full-size inputs (the chip keeps the last task it held until the next)."""
        with self.lock:
            for key in keys:
                self._payloads.pop(key, None)

    def _send(self, task, chip_key: str, restore: bool = False, arbiter: bool = True) -> JobOutcome:
        """Put a task's reference on the chip; ``restore``: again, for a check (not timed or judged again), with
        the highest-precision reference only where it ran the first time (``arbiter``)."""
        n_inputs, arrays = self._payloads[chip_key]
        job = DeviceReferenceJob(platform=self.platform.spec, key=chip_key, n_inputs=n_inputs, restore=restore,
                                 arbiter=arbiter)
        return self.pool.run_device(job, arrays, timeout=self.timeout_s)

    def check(self, task, chip: ChipReference, program: np.ndarray,
              rebuild: Callable[[], ChipReference | None]) -> tuple[JobOutcome, ChipReference | None]:
        """Run a checked candidate's full-size program on the chip; (what came back, the reference it ran
        against). A device worker that restarted, or that holds another task, is given this one again."""
        with self.lock:
            outcome = self._check(task, chip, program)
            if outcome.last("need_reference") is None:
                return outcome, chip
            if chip.key in self._payloads:
                held = self._send(task, chip.key, restore=True, arbiter=chip.exact_outputs is not None)
                if held.status != "done" or held.last("device_reference") is None:
                    return held, chip
            else:  # let go of: build the reference again (new inputs, XLA timed again)
                chip = rebuild()
                if chip is None:
                    return JobOutcome("crashed", log_tail="the reference could not be put on the chip again"), None
            outcome = self._check(task, chip, program)
            if outcome.last("need_reference") is not None:
                return JobOutcome("crashed", log_tail="the device worker lost the reference twice"), chip
            return outcome, chip

    def _check(self, task, chip: ChipReference, program: np.ndarray) -> JobOutcome:
        job = DeviceCheckJob(platform=self.platform.spec, key=chip.key, atol=_scalar(task.atol),
                             rtol=_scalar(task.rtol))
        return self.pool.run_device(job, [program])


def _scalar(tol) -> float:
    """The tolerance the device worker holds repeated calls to (the tightest of a per-output tolerance)."""
    return float(tol) if isinstance(tol, (int, float)) else float(min(tol)) if tol else 0.0
