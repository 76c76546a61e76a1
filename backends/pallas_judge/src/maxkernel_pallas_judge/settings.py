"""The backend's own config section, ``[eval]``: how candidates are judged on this machine."""

from __future__ import annotations

import os

from attrs import define, field
from maxkernel_core import SettingsSection


@define
class EvalSettings(SettingsSection):
    """``[eval]`` (``MAXKERNEL_EVAL_*``): limits and inputs of the sandboxed judge."""

    name = "eval"

    #: Wall-clock limit for judging one candidate (the worker is killed past it).
    timeout_s: float = 300.0
    #: Address-space limit of a worker process, MiB (JAX alone maps about 2 GiB).
    memory_mb: int = 8192
    #: Input sets checked besides the task's own (new seeds, or regenerated values).
    fresh_inputs: int = 3
    #: Pre-warmed worker processes kept ready.
    spares: int = 1
    #: "auto" (a TPU when one is attached, else CPU interpret mode), "cpu" or "tpu".
    device: str = "auto"
    #: Wall-clock limit for a task's trusted reference job (trace, XLA compile, the small runs); past it the
    #: task fails with the stage it was stuck in.
    reference_timeout_s: float = 900.0
    #: Limit on XLA's compile of the reference for the target (only XLA's estimate needs it): past it the task
    #: is judged without XLA's figures, and says so.
    reference_compile_timeout_s: float = 240.0
    #: Tasks' reference jobs run at once (each may use half the host's memory): more than 1 only on a host
    #: with room, where several tasks are judged at once (``benchmarks/measured_bench.py --jobs``).
    references_at_once: int = 1
    #: Where the tasks' references computed on the CPU are kept across runs (``judge/reference_cache.py``: keyed
    #: by the task's files, the judge's code and the libraries' versions): empty for ``references/`` in the run
    #: store's home, a folder, or "off".
    reference_cache: str = field(factory=lambda: os.environ.get("MAXKERNEL_EVAL_REFERENCE_CACHE", ""))


def eval_settings(settings) -> EvalSettings:
    """The run's ``[eval]`` section, or its defaults for settings made in code."""
    return settings.section(EvalSettings.name, EvalSettings) if settings is not None else EvalSettings()
