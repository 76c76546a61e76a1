"""What the pool's callers hand it and get back: a worker's limits, and how one job went."""

from __future__ import annotations

import signal
from typing import Any

import numpy as np
from attrs import define, field, frozen


@frozen
class Limits:
    timeout_s: float = 300.0
    memory_mb: int = 8192
    cpu_s: int | None = None  # default: timeout x cores
    #: "cpu" forces JAX onto the CPU (Pallas interpret mode); "auto" uses the chip when one is attached; the
    #: platform's name ("tpu", "gpu") uses it
    device: str = "auto"
    #: the chip the judge judges for (``judge.platform``): "module:ATTRIBUTE", loaded in every worker
    platform: str = ""
    #: folders the judge reads that a candidate must not see where a folder bound into its sandbox holds them
    #: (the references it keeps across runs: ``judge/reference_cache.py``)
    hidden: tuple[str, ...] = ()


@define
class JobOutcome:
    """What came back from one job: its messages, and how the process ended if it did."""

    status: str  # "done" | "timeout" | "crashed"
    messages: list[tuple[dict[str, Any], list[np.ndarray]]] = field(factory=list)
    returncode: int | None = None
    log_tail: str = ""
    wall_s: float = 0.0
    sandbox: str = ""
    #: (stage, seconds into the job when the worker began it): where a job's time went
    stages: list[tuple[str, float]] = field(factory=list)

    @property
    def stage(self) -> str:
        """The stage the worker began last (where a job that never finished was stuck)."""
        return self.stages[-1][0] if self.stages else ""

    def last(self, kind: str) -> tuple[dict[str, Any], list[np.ndarray]] | None:
        for header, arrays in reversed(self.messages):
            if header.get("type") == kind:
                return header, arrays
        return None

    def all(self, kind: str) -> list[tuple[dict[str, Any], list[np.ndarray]]]:
        return [(h, a) for h, a in self.messages if h.get("type") == kind]

    @property
    def how_it_ended(self) -> str:
        rc = self.returncode
        if rc is None:
            return "still running"
        if rc < 0:
            try:
                return f"killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"killed by signal {-rc}"
        return f"exited with code {rc}"
