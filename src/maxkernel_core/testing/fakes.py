"""Fakes for tests of plugins and strategies: a scripted LLM, a scripted backend, hook recording.

    fake = FakeLLMProvider()
    fake.enqueue("```python\\n...\\n```")           # the next completion
    fake.enqueue(ProviderError("rate limited"))     # or an exception to raise
    ... run code that calls fake.complete(...) ...
    fake.history[0].messages                        # what was asked
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs

from ..hookspecs import hookimpl
from ..interfaces import Backend, LLMProvider, LLMRequest, LLMResponse, TaskRef
from ..records import Candidate, EvalStatus, Evaluation, Plan, Provenance, Task


class FakeLLMProvider(LLMProvider):
    """An LLM provider that answers from a queue and remembers every request."""

    name = "fake"

    def __init__(self, settings: Any = None) -> None:
        super().__init__(settings)
        self._queue: deque[str | LLMResponse | BaseException] = deque()
        self.history: list[LLMRequest] = []

    def enqueue(self, *replies: str | LLMResponse | BaseException) -> FakeLLMProvider:
        """Queue replies (text, a full response, or an exception to raise), oldest answered first."""
        self._queue.extend(replies)
        return self

    def complete(self, request: LLMRequest) -> LLMResponse:
        self.history.append(request)
        if not self._queue:
            raise AssertionError(f"FakeLLMProvider got a request with nothing enqueued: {request.messages[-1:]}")
        reply = self._queue.popleft()
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, str):
            reply = LLMResponse(text=reply, model=request.model or "fake", input_tokens=sum(
                len(m.content.split()) for m in request.messages), output_tokens=len(reply.split()))
        return reply


class FakeBackend(Backend):
    """A backend whose tasks are given in code and whose verdicts come from a function or a queue.

    By default a candidate is ``ok`` when its code contains ``"pallas_call"``,
    which is enough to test strategies and the run store without JAX.
    """

    name = "fake"

    def __init__(self, settings: Any = None, tasks: dict[str, Task] | None = None,
                 judge: Callable[[Task, Candidate], Evaluation] | None = None) -> None:
        super().__init__(settings)
        self.tasks = tasks if tasks is not None else {"fake_matmul": Task("fake_matmul", "fake", "<memory>")}
        self.judge = judge or self.default_judge
        self.verdicts: deque[Evaluation] = deque()
        self.evaluated: list[Candidate] = []
        #: what :meth:`judge_fingerprint` returns (None: verdicts are never reused, as for a backend without one)
        self.fingerprint: str | None = None
        #: what :meth:`tuning_key` returns with the task and target added (None: nothing is kept)
        self.tuning: dict[str, str] | None = None

    @staticmethod
    def default_judge(task: Task, candidate: Candidate) -> Evaluation:
        ok = "pallas_call" in candidate.code
        return Evaluation(candidate.id, EvalStatus.OK if ok else EvalStatus.REJECTED,
                          "" if ok else "no pallas_call in the candidate")

    def enqueue(self, *verdicts: Evaluation) -> FakeBackend:
        self.verdicts.extend(verdicts)
        return self

    def discover_tasks(self, root: Path) -> list[TaskRef]:
        return [TaskRef(t.id, t.path, "fake", self.name) for t in self.tasks.values()]

    def load_task(self, ref: str | Path, search_paths: tuple[Path, ...] = ()) -> Task:
        from ..errors import TaskError

        if str(ref) not in self.tasks:
            raise TaskError(f"no fake task {ref!r}")
        return self.tasks[str(ref)]

    def judge_fingerprint(self, task: Task, *, target: str) -> str | None:
        return None if self.fingerprint is None else f"{self.fingerprint}/{task.id}/{target}"

    def tuning_key(self, task: Task, *, target: str) -> dict[str, str] | None:
        return None if self.tuning is None else {**self.tuning, "task": task.id, "target": target}

    def tuning_versions(self) -> str | None:
        return None if self.tuning is None else self.tuning.get("versions")

    def evaluate(self, task: Task, candidate: Candidate, *, target: str) -> Evaluation:
        self.evaluated.append(candidate)
        if self.verdicts:
            return attrs.evolve(self.verdicts.popleft(), candidate_id=candidate.id, target=target)
        return attrs.evolve(self.judge(task, candidate), target=target)


class ScriptedAgents:
    """Planner, implementer and debugger roles that answer from queues of source code.

    ``enqueue("code", ...)`` queues candidate modules for the implementer;
    ``enqueue_fix("code")`` queues the debugger's fixes (none queued: no fix).
    Plain (not ``trylast``) implementations: registered in a test, they answer
    before the installed agents, which are the ``trylast`` fallbacks.
    """

    def __init__(self) -> None:
        self.codes: deque[str] = deque()
        self.fixes: deque[str] = deque()
        self.plans: list[Plan] = []

    def enqueue(self, *codes: str) -> ScriptedAgents:
        self.codes.extend(codes)
        return self

    def enqueue_fix(self, *codes: str) -> ScriptedAgents:
        self.fixes.extend(codes)
        return self

    @hookimpl
    def agent_plan(self, task, history):
        plan = Plan(task.id, f"attempt {len(history) + 1}")
        self.plans.append(plan)
        return plan

    @hookimpl
    def agent_implement(self, task, plan):
        if not self.codes:
            raise AssertionError("ScriptedAgents.agent_implement called with no code enqueued")
        return Candidate(task.id, self.codes.popleft(), provenance=Provenance(role="implement", plan_id=plan.id))

    @hookimpl
    def agent_debug(self, task, candidate):
        if not self.fixes:
            return None
        return Candidate(task.id, self.fixes.popleft(), parent_id=candidate.id, provenance=Provenance(role="debug"))


class FakeTester:
    """A plugin implementing the tester role by asking ``ctx.judge`` (the backend, on the run's executor)."""

    @hookimpl(trylast=True)
    def agent_test(self, task, candidate, ctx):
        return ctx.judge(task, candidate)


@contextlib.contextmanager
def registered_plugin(pm, plugin: Any, name: str | None = None) -> Iterator[Any]:
    """Register ``plugin`` on ``pm`` for the duration of the block, then unregister it."""
    registered = pm.register(plugin, name=name)
    try:
        yield plugin
    finally:
        if registered is not None and pm.has_plugin(registered):
            pm.unregister(name=registered)


@attrs.define
class HookCall:
    name: str
    kwargs: dict[str, Any]
    result: Any = None
    error: BaseException | None = None


class HookRecorder:
    """Records every hook call made through a plugin manager while active.

        with HookRecorder(pm) as rec:
            ...
        rec.getcalls("agent_plan")[0].kwargs["task"]
    """

    def __init__(self, pm) -> None:
        self.pm = pm
        self.calls: list[HookCall] = []
        self._undo: Callable[[], None] | None = None

    def __enter__(self) -> HookRecorder:
        pending: list[HookCall] = []

        def before(hook_name, hook_impls, kwargs):
            pending.append(HookCall(hook_name, dict(kwargs)))

        def after(outcome, hook_name, hook_impls, kwargs):
            call = pending.pop()
            try:
                call.result = outcome.get_result()
            except BaseException as exc:  # record, don't swallow: the caller still sees it
                call.error = exc
            self.calls.append(call)

        self._undo = self.pm.add_hookcall_monitoring(before, after)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._undo:
            self._undo()
            self._undo = None

    def getcalls(self, name: str) -> list[HookCall]:
        return [c for c in self.calls if c.name == name]
