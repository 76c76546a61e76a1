"""The hooks a maxkernel plugin can implement: this file is the whole plugin contract.

A plugin is a module or object with functions decorated by
``maxkernel_core.hookimpl`` whose names and parameters match a spec below; it
is found through the ``maxkernel`` entry-point group, which is how the
built-in plugins are found too. A plugin may take any subset of a hook's
parameters, in any order (pluggy passes them by name).

Two kinds of hook:

* **Discovery** (``register_*``): called once per plugin manager; every
  implementation is called (*collected*). Each receives a ``register`` callback.
* **Roles** (``agent_*``): the five sub-agent roles. They are *firstresult*:
  implementations are tried in order until one returns something other than
  ``None``. Built-ins are registered with ``trylast=True``, so a third-party
  implementation runs first and the built-in is the fallback; return ``None``
  to pass, or a :class:`~maxkernel_core.records.Decline` to answer that there
  is nothing to offer (the call ends there: no fallback is asked). A ``hookimpl(wrapper=True)`` sees every call and its result (the
  core uses one for timing and the run log).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    import click

    from .config import Settings
    from .records import Attempt, Candidate, Decline, Evaluation, Move, Plan, Profile, Task
    from .agent_context import AgentContext

from .markers import PROJECT_NAME, hookimpl, hookspec  # noqa: F401  (plugins import them from here)


# --- discovery -------------------------------------------------------------


@hookspec
def register_backends(register: Callable[..., None]) -> None:
    """Register backend classes.

    :param register: call ``register(BackendClass)`` for each
        :class:`~maxkernel_core.interfaces.Backend` subclass; it is registered
        under ``BackendClass.name``.
    :returns: nothing; every implementation is called.

    Two plugins registering the same name is an error naming both plugins.
    """


@hookspec
def register_strategies(register: Callable[..., None]) -> None:
    """Register strategy classes.

    :param register: call ``register(StrategyClass)`` for each
        :class:`~maxkernel_core.interfaces.Strategy` subclass; it is registered
        under ``StrategyClass.name`` and selected with ``--strategy NAME``.
    :returns: nothing; every implementation is called.
    """


@hookspec
def register_llm_providers(register: Callable[..., None]) -> None:
    """Register LLM provider classes.

    :param register: call ``register(ProviderClass)`` for each
        :class:`~maxkernel_core.interfaces.LLMProvider` subclass; it is
        registered under ``ProviderClass.name`` and selected with ``--provider NAME``
        or ``run.provider`` / ``llm.roles.<role>.provider`` in config.
    :returns: nothing; every implementation is called.
    """


@hookspec
def register_task_suites(register: Callable[..., None]) -> None:
    """Register task suites.

    :param register: call ``register(SuiteClass)`` for each
        :class:`~maxkernel_core.interfaces.TaskSuite` subclass; it is registered
        under ``SuiteClass.name``, selected with ``maxkernel bench --suite NAME``,
        and its tasks are found by id by ``maxkernel run --task ID``.
    :returns: nothing; every implementation is called.
    """


@hookspec
def register_executors(register: Callable[..., None]) -> None:
    """Register executor classes: where evaluations run (this machine's pool, a cluster).

    :param register: call ``register(ExecutorClass)`` for each
        :class:`~maxkernel_core.interfaces.Executor` subclass; it is registered
        under ``ExecutorClass.name`` and selected with ``--executor NAME`` or
        ``executor.name`` in config.
    :returns: nothing; every implementation is called.
    """


@hookspec
def register_settings(register: Callable[..., None]) -> None:
    """Declare this plugin's own config sections (as pytest's ``pytest_addoption`` declares options).

    :param register: call ``register(SectionClass)`` for each
        :class:`~maxkernel_core.interfaces.SettingsSection` subclass, an attrs class of typed,
        defaulted fields named ``SectionClass.name``. Its ``[NAME]`` table in maxkernel.toml and
        ``MAXKERNEL_NAME_KEY`` variables are checked against the fields (unknown keys and wrong types
        are one-line errors), ``maxkernel config show`` lists it, and the plugin reads it with
        ``settings.section(NAME)``.
    :returns: nothing; every implementation is called.

    Two plugins declaring the same section name is an error naming both.
    """


@hookspec
def register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``maxkernel`` command line.

    :param cli: the root click group; decorate functions with ``@cli.command()``.
    :returns: nothing; every implementation is called.
    """


@hookspec(firstresult=True)
def serve_ui(settings: Settings) -> AbstractContextManager[str] | None:
    """Serve a web UI over the run store while ``maxkernel run --ui`` runs.

    :param settings: the run's resolved settings (``settings.store.home`` names the store).
    :returns: a context manager that starts the server on entry (its value: the URL, printed for the
        person) and stops it on exit, or ``None`` to let another plugin serve. When no plugin serves,
        ``run --ui`` is a one-line error naming the extra to install. The interactive strategy's questions
        go through the store (:class:`~maxkernel_core.store.prompts.PromptRecords`), so any UI over the
        same store can answer them.
    """


# --- the five sub-agent roles ---------------------------------------------------


@hookspec(firstresult=True)
def agent_plan(task: Task, history: Sequence[Attempt], ctx: AgentContext) -> Plan | Decline | None:
    """Planner: decide what the next kernel should do.

    :param task: the task being optimized.
    :param history: earlier attempts of this run, oldest first, with verdicts.
    :param ctx: the run's context (config, backend, LLM access, latest profile).
    :returns: a :class:`~maxkernel_core.records.Plan`, a ``Decline`` when the planner
        has nothing more to propose, or ``None`` to let the next implementation
        answer. First non-``None`` result wins.
    """


@hookspec(firstresult=True)
def agent_neighbours(task: Task, candidate: Candidate, ctx: AgentContext) -> list[Move] | None:
    """Search moves: the points of ``candidate``'s parameter space worth judging next, best first.

    Strategies call this to search (auto's autotune, graph's children); the author of a
    candidate knows its space and what each point should cost, and orders its moves by
    that. A strategy skips a move the backend's ``check_fit`` rules out, and one whose
    code it has judged already.

    :param task: the task being optimized.
    :param candidate: the candidate to move from (its ``space`` and ``parameters``).
    :param ctx: the run's context.
    :returns: :class:`~maxkernel_core.records.Move` records (each a whole new point),
        an empty list when no move is left, or ``None`` to pass (the strategies'
        generic rule, moves of one declared parameter at a time, is the fallback).
    """


@hookspec(firstresult=True)
def agent_implement(task: Task, plan: Plan, ctx: AgentContext) -> Candidate | None:
    """Implementer: write a whole candidate module from ``plan``.

    :param task: the task being optimized.
    :param plan: the plan to implement.
    :param ctx: the run's context.
    :returns: a :class:`~maxkernel_core.records.Candidate` whose ``code`` is the
        complete module, or ``None`` to pass. First non-``None`` result wins.
    """


@hookspec(firstresult=True)
def agent_debug(
    task: Task, candidate: Candidate, evaluation: Evaluation, attempts: Sequence[Attempt], ctx: AgentContext
) -> Candidate | Decline | None:
    """Debugger: fix a candidate that failed to compile or to pass a check.

    :param task: the task being optimized.
    :param candidate: the failed candidate.
    :param evaluation: its verdict (status, reason, compiler message).
    :param attempts: earlier debug attempts on this lineage, oldest first.
    :param ctx: the run's context.
    :returns: a new candidate whose ``parent_id`` is ``candidate.id``, a ``Decline``
        when this author has no fix, or ``None`` to pass. First non-``None`` result wins.
    """


@hookspec(firstresult=True)
def agent_test(task: Task, candidate: Candidate, ctx: AgentContext) -> Evaluation | None:
    """Tester, for a plugin that replaces the core's: judge a candidate, from outside its process.

    Without one the core judges it the one way: the selected backend's judge on the run's executor
    (``ctx.judge``). Implement this only to put something else in front of it (an LLM that writes tests, a
    remote judging service), and end in ``ctx.judge`` where the verdict must still be the backend's.

    :param task: the task the candidate claims to solve.
    :param candidate: the candidate to judge.
    :param ctx: the run's context (``ctx.backend`` is the selected backend).
    :returns: an :class:`~maxkernel_core.records.Evaluation` (its ``test`` field holds
        the correctness :class:`~maxkernel_core.records.TestReport`), or ``None``
        to leave it to the core. First non-``None`` result wins.
    """


@hookspec(firstresult=True)
def agent_profile(task: Task, candidate: Candidate, ctx: AgentContext) -> Profile | None:
    """Profiler, for a plugin that replaces the core's: estimate or measure a candidate's speed and say what
    bounds it.

    Without one the core reads the speed off the candidate's verdict (``Evaluation.profile``, measured on the
    chip, else ``Evaluation.estimate``): the judge traced and timed the kernel already. Implement this for a
    profiler of another kind (a remote device farm, a simulator).

    :param task: the task.
    :param candidate: a candidate that passed the tester.
    :param ctx: the run's context.
    :returns: a :class:`~maxkernel_core.records.Profile` (``estimated`` says whether
        its figures are a model's or measured), or ``None`` to leave it to the core. First
        non-``None`` result wins.
    """
