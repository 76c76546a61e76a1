"""What a backend, an executor and an LLM provider must offer (a strategy: ``strategy.py``).

Plugins register classes that subclass these through the ``register_*`` hooks in
:mod:`maxkernel_core.hookspecs`. The core only ever talks to plugins through
these methods, so a third-party class that implements them is as good as a
built-in one.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from attrs import field, frozen

from .records import Candidate, Evaluation, Fit, Task, record

if TYPE_CHECKING:
    from .config import Settings


@frozen
class TaskRef:
    """A task found on disk, described without importing its code."""

    id: str
    path: str
    format: str
    backend: str
    sizes: tuple[str, ...] = ()
    dtype: str = ""
    problem: str | None = None  # why it cannot load, if it cannot


class Backend(abc.ABC):
    """Turns tasks and candidate source into verdicts for one kind of accelerator."""

    #: The name users select with ``--backend`` and config ``run.backend``.
    name: ClassVar[str]

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings

    def task_roots(self) -> list[Path]:
        """Folders of task suites this backend bundles, searched after ``tasks.paths``."""
        return []

    @abc.abstractmethod
    def discover_tasks(self, root: Path) -> list[TaskRef]:
        """Tasks found under ``root`` in a format this backend reads; no task code is run."""

    @abc.abstractmethod
    def load_task(self, ref: str | Path, search_paths: tuple[Path, ...] = ()) -> Task:
        """Load one task by path or by id (looked up in ``search_paths``).

        Raises :class:`~maxkernel_core.errors.TaskError` with one line naming the
        file and what is wrong when the task is malformed.
        """

    @abc.abstractmethod
    def evaluate(self, task: Task, candidate: Candidate, *, target: str) -> Evaluation:
        """Judge ``candidate`` against ``task`` from outside the candidate's process."""

    def evaluation_timeout_s(self) -> float | None:
        """The longest one evaluation may take here (the judge's own limit), so that an executor can tell a
        slow host from a lost one; None: no limit is known."""
        return None

    def check_fit(self, task: Task, candidate: Candidate, *, target: str) -> Fit | None:
        """Whether ``candidate``'s blocks fit the target's on-chip memory, known before any compile.

        Strategies skip a point of a parameter space this rules out (it is not judged and costs no
        budget). None: this backend cannot tell without compiling.
        """
        return None

    def judge_fingerprint(self, task: Task, *, target: str) -> str | None:
        """Everything but the candidate's code that a verdict on ``task`` depends on, as one string: the
        task's files, the target, the judge's settings, compiler and cost-model versions. Two evaluations
        with equal fingerprints and equal code must reach the same verdict, so the session judges such
        code once (in the run and across runs on the store). None: verdicts are never reused.
        """
        return None

    def tuning_key(self, task: Task, *, target: str) -> dict[str, str] | None:
        """What identifies ``task``'s operator for the tuned-config table, as short strings: e.g. the
        reference's program fingerprint (``signature``), its input ``shapes`` and dtypes, the ``target`` and
        the compiler ``versions``. Tasks with equal keys share a tuned kernel; None: nothing is kept."""
        return None

    def tuning_versions(self) -> str | None:
        """The ``versions`` this installation puts in its tuning keys (``maxkernel tuned check`` compares a
        shipped table's entries with it); None: this backend keeps no versions."""
        return None

    def knowledge(self, task: Task, *, target: str, budget_chars: int) -> str:
        """Backend rules and chip facts for prompts, at most ``budget_chars`` long."""
        return ""

    def task_prompt(self, task: Task) -> str:
        """The task as a model should see it: what to compute, shapes, dtypes, tolerances."""
        return (f"Task {task.id}: {task.description}\nInput dtype {task.dtype or 'see reference'}; "
                f"tolerances atol={task.atol}, rtol={task.rtol}.")

    def deliverables(self, evaluation: Evaluation) -> dict[str, bytes]:
        """Files a run writes beside the best kernel's source, by name: the program its verdict is about
        (``Evaluation.artifact``), so that what users run is what was judged. None by default."""
        return {}

    def host_checks(self) -> list[HostCheck]:
        """What this backend finds on this host (its chip and how it was found, the sandbox candidates run in),
        for ``maxkernel doctor``; nothing by default."""
        return []

    def close(self) -> None:
        """Release worker processes and other resources (by default there are none)."""
        return None


class Executor(abc.ABC):
    """Where a backend's evaluations run: this machine's worker pool, or the hosts of a cluster.

    An executor only moves work: the verdict is always the named backend's own judge (its
    sandboxed worker pool), on whatever host runs it. Candidate code never runs in the
    executor's own processes. It must be safe to call :meth:`evaluate` from several threads.
    """

    #: The name users select with ``--executor`` and config ``executor.name``.
    name: ClassVar[str]
    #: One line for ``maxkernel plugins`` and ``--help``.
    description: ClassVar[str] = ""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings

    @property
    def max_concurrency(self) -> int:
        """How many evaluations it can usefully run at once (callers size their thread pools by it)."""
        return 1

    @abc.abstractmethod
    def evaluate(self, backend: Backend, task: Task, candidate: Candidate, *, target: str) -> Evaluation:
        """Judge ``candidate`` with ``backend``'s judge (or the same backend's, by name, on another host).

        Raises :class:`~maxkernel_core.errors.ExecutorError` when the evaluation could not be
        run at all (it never turns a lost host into a verdict on the candidate).
        """

    def close(self) -> None:
        """Release hosts, connections and worker processes (by default there are none)."""
        return None


class TaskSuite:
    """A named collection of tasks (``maxkernel bench --suite NAME``, ``maxkernel run --task ID``).

    A suite is a folder the backend named by ``backend`` can discover tasks in;
    a plugin ships it as package data and registers this class.
    """

    #: The name users select with ``--suite``.
    name: ClassVar[str]
    #: The backend whose task formats the folder holds.
    backend: ClassVar[str]
    #: One line for ``maxkernel plugins`` and ``maxkernel bench --help``.
    description: ClassVar[str] = ""

    @classmethod
    @abc.abstractmethod
    def root(cls) -> Path:
        """The folder holding the suite's tasks."""


class SettingsSection:
    """Base of a plugin's own config section: subclass it as an attrs class of typed, defaulted fields.

    Registered through ``register_settings``; ``[NAME]`` in maxkernel.toml, ``MAXKERNEL_NAME_KEY`` in the
    environment and ``maxkernel config show`` then treat it as they treat the core's sections (unknown
    keys and wrong types are one-line errors), and the plugin reads it with ``settings.section(NAME)``.
    """

    #: The section's name: ``[NAME]`` in config.
    name: ClassVar[str]


@record
@frozen
class LLMMessage:
    role: str  # "system" | "user" | "assistant"
    content: str


@record
@frozen
class LLMRequest:
    """What a role asks a model: messages plus sampling options."""

    messages: tuple[LLMMessage, ...]
    model: str | None = None
    temperature: float | None = None
    max_output_tokens: int | None = None
    role: str = ""
    options: dict[str, Any] = field(factory=dict)


@record
@frozen
class LLMResponse:
    """A model's reply and what it cost."""

    text: str
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    latency_s: float = 0.0
    finish_reason: str = ""


@frozen
class HostCheck:
    """One fact a backend reports about this host for ``maxkernel doctor``: what was checked, whether it is as
    it should be, and in a sentence what was found and how (or what to do)."""

    name: str
    ok: bool
    message: str


@frozen
class Readiness:
    """Whether a provider can be used now, and if not, what to do about it."""

    ready: bool
    message: str = ""


class LLMProvider(abc.ABC):
    """A source of model completions (a vendor SDK, a local server, a replay, a synthesizer)."""

    name: ClassVar[str]
    #: Other names that select it (an old name kept working after a rename); listed under ``name``.
    aliases: ClassVar[tuple[str, ...]] = ()
    #: Environment variables any one of which makes the provider ready (empty: none needed).
    key_env_vars: ClassVar[tuple[str, ...]] = ()

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings

    def readiness(self) -> Readiness:
        """Ready unless every env var in ``key_env_vars`` is unset."""
        import os

        if not self.key_env_vars or any(os.environ.get(v) for v in self.key_env_vars):
            return Readiness(True)
        names = " or ".join(self.key_env_vars)
        return Readiness(False, f"set {names} to use provider {self.name!r}")

    @abc.abstractmethod
    def complete(self, request: LLMRequest) -> LLMResponse:
        """Return the model's reply to ``request``; raise ProviderError when it cannot."""
