"""What a role implementation may use besides its records: the run's backend, executor, store, models and
caches (``AgentContext``). The session (``session.py``) makes one per run and hands it to every hook."""

from __future__ import annotations

import threading
from typing import Any

from attrs import define, field

from .activity import Activity
from .errors import PluginError
from .interfaces import Backend, Executor, LLMRequest, LLMResponse
from .llm import Budget, RetryPolicy, complete
from .llm_roles import RoleLLM, TranscriptRecorder
from .local_executor import LocalExecutor
from .records import Candidate, Evaluation, Plan, Profile, RunConfig, Task
from .store import RunStore


@define
class AgentContext:
    """What a role implementation may use besides its records."""

    run_id: str
    config: RunConfig
    backend: Backend
    store: RunStore
    #: role ("plan", "implement", "debug") -> the model that answers it
    llms: dict[str, RoleLLM] = field(factory=dict)
    budget: Budget = field(factory=Budget)
    policy: RetryPolicy = field(factory=RetryPolicy)
    #: the latest profile of the best candidate, for the planner
    profile: Profile | None = None
    #: a person's instructions for the planner (human-in-the-loop), newest last
    feedback: list[str] = field(factory=list)
    #: plans a person rejected (human-in-the-loop): a planner should not propose them again
    rejected: list[Plan] = field(factory=list)
    recorder: TranscriptRecorder | None = None
    #: where evaluations run (``--executor``); by default this machine's (the backend's own worker pool)
    executor: Executor = field(factory=LocalExecutor)
    #: what the run waits on now (model calls, verdicts), for the live line
    activity: Activity = field(factory=Activity)
    #: times a role may be asked again after a reply without usable code (``llm.reply_retries``)
    reply_retries: int = 2
    #: replies a role could not use (no code block, a module that does not parse), each asked again; roles
    #: run concurrently, so count with :meth:`note_unusable_reply`
    unusable_replies: int = 0
    _gate: threading.Semaphore = field(factory=lambda: threading.Semaphore(4))
    _caches: dict[str, dict[str, Any]] = field(factory=dict)
    _caches_lock: threading.Lock = field(factory=threading.Lock)

    def cache(self, owner: str) -> dict[str, Any]:
        """A dict that lives as long as the run, private to ``owner`` (a plugin's name): where a plugin
        keeps what it computed once per run. No plugin reads another's."""
        with self._caches_lock:
            return self._caches.setdefault(owner, {})

    def note_unusable_reply(self) -> None:
        """Count one model reply a role could not use (thread-safe: a graph search runs roles at once)."""
        with self._caches_lock:
            self.unusable_replies += 1

    def judge(self, task: Task, candidate: Candidate) -> Evaluation:
        """The backend's verdict on ``candidate``, run where the run's executor puts it: what a plugin that
        replaces the tester role calls for the judge's verdict, the same call the session makes."""
        return self.executor.evaluate(self.backend, task, candidate, target=self.config.target)

    def llm_for(self, role: str) -> RoleLLM:
        llm = self.llms.get(role) or self.llms.get("default")
        if llm is None:
            raise PluginError(f"no LLM provider is configured for role {role!r}: set run.provider")
        return llm

    def complete(self, request: LLMRequest) -> LLMResponse:
        """Ask the role's model: retried, budgeted, and logged to the run store (failed attempts too)."""
        llm = self.llm_for(request.role or "default")
        request = llm.prepare(request)
        name = llm.provider.name

        def log(req: LLMRequest, resp: LLMResponse | None, error: str | None, latency: float) -> None:
            self.store.add_llm_call(self.run_id, provider=name, request=req, response=resp, error=error,
                                    latency_s=latency)

        what = f"waiting for {name}:{request.model or 'default model'} ({request.role or 'default'} role)"
        with self._gate:
            token = self.activity.begin(what, self.policy.max_retries)
            try:
                response = complete(llm.provider, request, policy=self.policy, budget=self.budget, log=log,
                                    on_retry=lambda n, err: self.activity.retrying(token, n, err))
            finally:
                self.activity.end(token)
        if self.recorder is not None:
            self.recorder(request, response, name)
        return response
