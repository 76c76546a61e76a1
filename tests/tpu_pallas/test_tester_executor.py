"""The TPU Pallas tester judges through the run's executor, and its profiler reads that verdict."""

from __future__ import annotations

from maxkernel_core import Executor
from maxkernel_core.records import Candidate, EvalStatus, Evaluation, Profile, RunConfig
from maxkernel_core.session import AgentContext


class Elsewhere(Executor):
    """Stands for a remote host: answers a verdict without touching the local backend's worker pool."""

    name = "elsewhere"

    def __init__(self) -> None:
        super().__init__()
        self.calls = []

    def evaluate(self, backend, task, candidate, *, target):
        self.calls.append((backend.name, candidate.id, target))
        return Evaluation(candidate.id, EvalStatus.OK, "judged elsewhere", target=target,
                          profile=Profile(candidate.id, "cost_model", True, seconds=2e-6))


def test_tester_goes_through_the_executor_and_the_profiler_reuses_its_verdict(tmp_path):
    from maxkernel_tpu_pallas import plugin
    from maxkernel_tpu_pallas.backend import TpuPallasBackend

    from .conftest import TASKS

    backend = TpuPallasBackend()
    task = backend.load_task(TASKS / "rmsnorm")
    candidate = Candidate(task.id, "def computation(x, w):\n    return x\n")
    executor = Elsewhere()
    ctx = AgentContext("run-x", RunConfig(task.id, target="v6e"), backend, store=None, executor=executor)
    verdict = plugin.agent_test(task=task, candidate=candidate, ctx=ctx)
    assert verdict.reason == "judged elsewhere" and executor.calls == [("tpu_pallas", candidate.id, "v6e")]
    profile = plugin.agent_profile(task=task, candidate=candidate, ctx=ctx)
    assert profile.seconds == 2e-6
    assert backend._evaluator is None  # nothing was judged (or re-judged) in this process
    backend.close()
