"""The core's tester judges through the run's executor, and its profiler reads that verdict: one way to the
judge, with no backend plugin answering the roles."""

from __future__ import annotations

from maxkernel_core import Executor, hookimpl
from maxkernel_core.plugins import get_plugin_manager
from maxkernel_core.records import Candidate, EvalStatus, Evaluation, Profile, RunConfig
from maxkernel_core.session import RunSession
from maxkernel_core.store import RunStore
from maxkernel_core.testing import registered_plugin


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


def _session(tmp_path, pm, executor):
    from maxkernel_tpu_pallas.backend import TpuPallasBackend

    from .conftest import TASKS

    backend = TpuPallasBackend()
    task = backend.load_task(TASKS / "rmsnorm")
    return RunSession(pm, RunStore(tmp_path / "runs.db"), task, RunConfig(task.id, target="v6e"), backend,
                      executor=executor), backend


def test_the_tester_goes_through_the_executor_and_the_profiler_reads_its_verdict(tmp_path):
    executor, pm = Elsewhere(), get_plugin_manager()
    # no installed plugin answers the tester or profiler roles: the core does, the one way
    assert not pm.hook.agent_test.get_hookimpls() and not pm.hook.agent_profile.get_hookimpls()
    session, backend = _session(tmp_path, pm, executor)
    candidate = Candidate(session.task.id, "def computation(x, w):\n    return x\n")
    verdict = session.evaluate(candidate)
    assert verdict.reason == "judged elsewhere" and executor.calls == [("tpu_pallas", candidate.id, "v6e")]
    assert session.profile(candidate).seconds == 2e-6 and len(executor.calls) == 1  # read, not judged again
    assert [role for role, _, answered in session.role_log.calls if answered] == ["test", "profile"]
    assert backend._evaluator is None  # nothing was judged (or re-judged) in this process
    backend.close()


def test_a_plugin_that_replaces_the_tester_is_asked_first(tmp_path):
    class ExtraTests:
        @hookimpl
        def agent_test(self, task, candidate, ctx):
            verdict = ctx.judge(task, candidate)  # the backend's verdict first, as the docs ask
            return Evaluation(candidate.id, EvalStatus.INCORRECT, f"extra tests failed after: {verdict.reason}",
                              target=verdict.target)

    executor, pm = Elsewhere(), get_plugin_manager()
    with registered_plugin(pm, ExtraTests(), name="extra-tests"):
        session, backend = _session(tmp_path, pm, executor)
        verdict = session.evaluate(Candidate(session.task.id, "def computation(x, w):\n    return x\n"))
    assert verdict.status is EvalStatus.INCORRECT and verdict.reason.endswith("judged elsewhere")
    assert len(executor.calls) == 1
    backend.close()
