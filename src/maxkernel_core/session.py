"""A run in progress: what a strategy drives, and what the role hooks receive.

A :class:`RunSession` calls the sub-agent role hooks, stores every candidate
and verdict before returning it (so a killed run loses nothing it evaluated),
and keeps the history that roles learn from. Strategies use nothing else.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs
from attrs import frozen

from .agent_context import AgentContext
from .errors import BudgetSpent, PluginError
from .markers import hookimpl
from .interfaces import Backend
from .llm_roles import RoleLLM
from .records import (
    Attempt,
    Candidate,
    Decline,
    Evaluation,
    Fit,
    Move,
    Plan,
    Profile,
    RunConfig,
    SearchEdge,
    SearchNode,
    Task,
    record,
)
from .store import RunStore
from .verdict_cache import REUSABLE, canonical_code, verdict_key

ROLES = ("plan", "implement", "debug", "test", "profile")
#: A strategy's re-evaluation of a kernel it is about to declare best: named, and counted apart from the budget.
RECHECK = "re-evaluation"
#: Fault injection for the resume tests: SIGKILL the process right after the N-th verdict is stored
#: (before the strategy records anything about it), the moment a real crash is most costly.
KILL_AFTER_EVALUATIONS_ENV = "MAXKERNEL_FAULT_KILL_AFTER_EVALUATIONS"


def is_recheck(candidate: Candidate) -> bool:
    # the words are how a run stored before ``Provenance.recheck`` marked one, and how ``--resume`` reads it
    return candidate.provenance.recheck or candidate.provenance.transformation == RECHECK


def counted(attempt: Attempt) -> bool:
    """Whether an attempt spent an evaluation of the budget (not a re-check, not a reused verdict)."""
    return not is_recheck(attempt.candidate) and not attempt.evaluation.reused_from


@record
@frozen
class RunResult:
    """How a run ended and its best verified candidate (never an unverified one)."""

    run_id: str
    task_id: str
    status: str  # "ok" | "no_valid_candidate" | "interrupted" | "failed"
    best: Attempt | None = None
    evaluations: int = 0  # counted against --budget
    message: str = ""
    rechecks: int = 0  # re-evaluations of a best kernel before it was declared, not counted against --budget
    reused: int = 0  # verdicts of identical code judged before (this run or an earlier one), not counted either
    unusable_replies: int = 0  # model replies without usable code, each answered by asking the role again


class RoleLog:
    """Times every role: the hook calls of the authors (wrapped), the tester and profiler where the session
    answers them (``timed``); the session reports the totals."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, bool]] = []

    def _timed(self, role: str):
        start, answered = time.monotonic(), False
        try:
            result = yield
            answered = result is not None
            return result
        finally:
            self.calls.append((role, time.monotonic() - start, answered))

    def timed(self, role: str, answer: Callable[[], Any]) -> Any:
        """``answer()``, timed as ``role`` (a plugin's hook inside it, or the core's own answer)."""
        start, answered = time.monotonic(), False
        try:
            result = answer()
            answered = result is not None
            return result
        finally:
            self.calls.append((role, time.monotonic() - start, answered))

    @hookimpl(wrapper=True)
    def agent_plan(self):
        return (yield from self._timed("plan"))

    @hookimpl(wrapper=True)
    def agent_implement(self):
        return (yield from self._timed("implement"))

    @hookimpl(wrapper=True)
    def agent_debug(self):
        return (yield from self._timed("debug"))


class RunSession:
    """One run: calls roles through the plugin manager and records everything as it happens."""

    def __init__(self, pm, store: RunStore, task: Task, config: RunConfig, backend: Backend,
                 llms: dict[str, RoleLLM] | None = None, run_id: str | None = None, settings: Any = None,
                 **ctx_options: Any) -> None:
        self.pm, self.store, self.task, self.config = pm, store, task, config
        self.settings = settings
        #: called as observer(attempt) after each verdict is stored (progress displays)
        self.observers: list = []
        resumed = run_id is not None
        self.run_id = run_id if resumed else store.create_run(config)
        self.ctx = AgentContext(self.run_id, config, backend, store, llms or {}, **ctx_options)
        self.history: list[Attempt] = []
        if resumed:  # pick up what a killed run already paid for
            verdicts = {e.candidate_id: e for e in store.evaluations(self.run_id)}
            self.history = [Attempt(c, verdicts[c.id]) for c in store.candidates(self.run_id) if c.id in verdicts]
        self._budget_lock = threading.Lock()
        self._in_flight = 0
        self._started = time.monotonic()  # the time limit counts from here (a resumed run gets it afresh)
        self.role_log = RoleLog()
        self._log_name = pm.register(self.role_log, name=f"maxkernel-role-log-{self.run_id}")

    def close(self) -> None:
        if self._log_name and self.pm.has_plugin(self._log_name):
            self.pm.unregister(name=self._log_name)

    def _ask(self, hook: str, **kwargs: Any) -> Any:
        """A role hook's answer, None when no plugin answers; a ``Decline`` is an error."""
        result = getattr(self.pm.hook, hook)(ctx=self.ctx, task=self.task, **kwargs)
        if isinstance(result, Decline):
            raise PluginError(f"{hook} declined: {result.reason}")
        return result

    def _call(self, hook: str, **kwargs: Any) -> Any:
        result = self._ask(hook, **kwargs)
        if result is None:
            raise PluginError(
                f"no plugin answered {hook} for backend {self.ctx.backend.name!r}: install the built-in "
                "plugins (see README) or a plugin that implements it"
            )
        return result

    # --- the five roles ------------------------------------------------------

    def plan(self, required: bool = True) -> Plan | None:
        """The planner's next plan; with ``required=False``, None when the planner declines (a search space
        exhausted, nothing more to propose) instead of an error."""
        if required:
            return self._call("agent_plan", history=tuple(self.history))
        plan = self.pm.hook.agent_plan(ctx=self.ctx, task=self.task, history=tuple(self.history))
        return None if isinstance(plan, Decline) else plan

    def neighbours(self, candidate: Candidate) -> list[Move] | None:
        """Moves through ``candidate``'s parameter space, best first, from the plugin that knows it; None when
        no plugin answers (the strategy's generic rule applies)."""
        return self.pm.hook.agent_neighbours(ctx=self.ctx, task=self.task, candidate=candidate)

    def check_fit(self, candidate: Candidate) -> Fit | None:
        """The backend's static check that ``candidate``'s blocks fit on-chip memory (None: it cannot tell)."""
        return self.ctx.backend.check_fit(self.task, candidate, target=self.config.target)

    def implement(self, plan: Plan) -> Candidate:
        return self._call("agent_implement", plan=plan)

    def debug(self, candidate: Candidate, evaluation: Evaluation, attempts: Sequence[Attempt] = ()) -> Candidate | None:
        """The debugger's fix, or None when it has none (declined or no answer)."""
        fixed = self.pm.hook.agent_debug(
            ctx=self.ctx, task=self.task, candidate=candidate, evaluation=evaluation, attempts=tuple(attempts)
        )
        return None if isinstance(fixed, Decline) else fixed

    def spent(self) -> int:
        """Evaluations counted against the budget (re-checks of a best kernel and reused verdicts are not)."""
        return sum(1 for a in self.history if counted(a))

    def budget_left(self) -> int | None:
        """Evaluations the run may still make; None without a budget."""
        budget = self.config.budget
        return None if budget is None else max(budget - self.spent() - self._in_flight, 0)

    def repair(self, candidate: Candidate, evaluation: Evaluation, max_attempts: int) -> Attempt:
        """The debugger loop: up to ``max_attempts`` fixes, each evaluated and recorded; the last attempt."""
        lineage = [Attempt(candidate, evaluation)]
        while not evaluation.ok and len(lineage) <= max_attempts and self.budget_left() != 0:
            fixed = self.debug(candidate, evaluation, tuple(lineage))
            if fixed is None:
                break
            candidate, evaluation = fixed, self.evaluate(fixed)
            lineage.append(Attempt(candidate, evaluation))
        return lineage[-1]

    def evaluate(self, candidate: Candidate, fresh: bool = False) -> Evaluation:
        """Store the candidate, judge it (tester role), store the verdict, then return it.

        The candidate's code is judged in canonical form (:func:`~maxkernel_core.verdict_cache.canonical_code`).
        Code judged before under the same judge (in this run, or in any run on the store) gets that verdict
        again, marked ``reused_from`` and not counted; a re-check, or ``fresh``, is always judged anew. The budget is a
        hard limit: past it a strategy gets :class:`BudgetSpent` (re-checks and reused verdicts excepted).
        """
        candidate = attrs.evolve(candidate, code=canonical_code(candidate.code))
        recheck = is_recheck(candidate)
        key = None if recheck else self._verdict_key(candidate)
        cached = self.store.cached_verdict(key) if key and not fresh else None
        if cached is not None:
            return self._reuse(candidate, *cached)
        with self._budget_lock:
            if not recheck and self.budget_left() == 0:
                raise BudgetSpent(f"the run's budget of {self.config.budget} evaluations is spent")
            limit = self.config.time_limit_s
            if not recheck and limit is not None and time.monotonic() - self._started > limit:
                raise BudgetSpent(f"the run's time limit of {limit:g} s is spent (no new evaluation starts)")
            self._in_flight += not recheck  # the slot is taken now: concurrent evaluations cannot overshoot
        try:
            self.store.add_candidate(self.run_id, candidate)
            token = self.ctx.activity.begin(f"judging {candidate.id}")
            try:
                evaluation = self.role_log.timed("test", lambda: self._judge(candidate))
            finally:
                self.ctx.activity.end(token)
            self.store.add_evaluation(self.run_id, evaluation)
            if key and evaluation.status in REUSABLE:
                self.store.cache_verdict(key, self.run_id, evaluation)
            self._record(Attempt(candidate, evaluation))
        finally:
            with self._budget_lock:
                self._in_flight -= not recheck
        self._fault_after_store()
        return evaluation

    def tuning_key(self) -> dict[str, str] | None:
        """The task's key in the tuned-config table (the backend's), computed once per run."""
        return self._tuning_key

    # Both asked of the backend once per run (two threads asking at once compute the same value twice).
    @functools.cached_property
    def _tuning_key(self) -> dict[str, str] | None:
        return self.ctx.backend.tuning_key(self.task, target=self.config.target)

    @functools.cached_property
    def _judge_fingerprint(self) -> str | None:
        return self.ctx.backend.judge_fingerprint(self.task, target=self.config.target)

    def _verdict_key(self, candidate: Candidate) -> str | None:
        fingerprint = self._judge_fingerprint
        return verdict_key(fingerprint, candidate.code) if fingerprint else None

    def _reuse(self, candidate: Candidate, origin: str, verdict: Evaluation) -> Evaluation:
        """The verdict identical code got before, stored for ``candidate`` (not counted against the budget)."""
        evaluation = attrs.evolve(verdict, candidate_id=candidate.id, reused_from=origin, created_at=time.time())
        self.store.add_candidate(self.run_id, candidate)
        self.store.add_evaluation(self.run_id, evaluation)
        self._record(Attempt(candidate, evaluation))
        return evaluation

    def _record(self, attempt: Attempt) -> None:
        with self._budget_lock:
            self.history.append(attempt)
        for observer in self.observers:
            observer(attempt)

    def _fault_after_store(self) -> None:
        limit = os.environ.get(KILL_AFTER_EVALUATIONS_ENV)
        if limit and len(self.store.evaluations(self.run_id)) >= int(limit):
            os.kill(os.getpid(), signal.SIGKILL)

    def _judge(self, candidate: Candidate) -> Evaluation:
        """The tester role: a plugin that replaces it (``agent_test``), else the backend's judge on the run's
        executor, the one way to a verdict."""
        evaluation = self._ask("agent_test", candidate=candidate)
        if evaluation is not None:
            return evaluation
        return self.ctx.executor.evaluate(self.ctx.backend, self.task, candidate, target=self.config.target)

    def profile(self, candidate: Candidate) -> Profile:
        """The profiler role: a plugin that replaces it (``agent_profile``), else the speed the candidate's
        verdict holds (measured on the chip, or the model's labelled estimate)."""
        profile = self.role_log.timed("profile", lambda: self._profile(candidate))
        self.ctx.profile = profile
        return profile

    def _profile(self, candidate: Candidate) -> Profile:
        profile = self._ask("agent_profile", candidate=candidate)
        if profile is None:
            verdict = self._verdict_of(candidate)
            profile = verdict.profile or verdict.estimate
            if profile is None:
                raise PluginError(f"the verdict on {candidate.id} holds no speed ({verdict.status.value}: "
                                  f"{verdict.reason[:200]})")
        return profile

    def _verdict_of(self, candidate: Candidate) -> Evaluation:
        """The run's verdict on ``candidate`` (judged already: its evaluation traced it at full size), else one
        judged now, outside the budget, as a profile of a candidate never evaluated always was."""
        with self._budget_lock:
            known = next((a.evaluation for a in reversed(self.history) if a.candidate.id == candidate.id), None)
        return known if known is not None else self._judge(candidate)

    # --- search graphs -------------------------------------------------------

    def add_node(self, node: SearchNode) -> None:
        self.store.add_node(node)

    def add_edge(self, edge: SearchEdge) -> None:
        self.store.add_edge(edge)

    # --- the end -------------------------------------------------------------

    def ruled_out(self) -> set[str]:
        """Kernels whose re-check failed: never reported as best, whatever their first verdict."""
        return {a.candidate.parent_id for a in self.history if is_recheck(a.candidate) and not a.evaluation.ok}

    def best(self, exclude: set[str] = frozenset()) -> Attempt | None:
        """The best verified attempt: ok verdicts only, measured figures ranked above estimates (never mixed as
        raw seconds), then the fastest; a re-check itself and a kernel whose re-check failed never count."""
        from .speed import rank

        excluded = set(exclude) | self.ruled_out()
        ok = [a for a in self.history if a.evaluation.ok and a.candidate.id not in excluded
              and not is_recheck(a.candidate)]
        if not ok:
            return None
        return min(ok, key=lambda a: rank(a.evaluation.profile))

    def finish(self, status: str | None = None, message: str = "", best_id: str | None = None) -> RunResult:
        """End the run with its best verified kernel: ``best_id`` if given and verified, else :meth:`best`,
        never a kernel whose re-check failed."""
        chosen = [a for a in self.history if a.candidate.id == best_id and a.evaluation.ok
                  and best_id not in self.ruled_out()]
        best = chosen[0] if chosen else self.best()
        status = status or ("ok" if best else "no_valid_candidate")
        rechecks = sum(1 for a in self.history if is_recheck(a.candidate))
        reused = sum(1 for a in self.history if a.evaluation.reused_from)
        result = RunResult(self.run_id, self.task.id, status, best, self.spent(), message, rechecks, reused,
                           self.ctx.unusable_replies)
        from .serialize import to_json

        self.store.set_run_status(self.run_id, status, to_json(result))
        self.close()
        return result
