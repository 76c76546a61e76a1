"""The run session: roles through hooks, every record stored before the next step, resume."""

import pytest

from maxkernel_core import hookimpl
from maxkernel_core.errors import PluginError, ProviderError
from maxkernel_core.interfaces import LLMMessage, LLMRequest
from maxkernel_core.plugins import get_plugin_manager
from maxkernel_core.records import EvalStatus, Evaluation, Profile, RunConfig
from maxkernel_core.llm_roles import RoleLLM
from maxkernel_core.session import RunSession
from maxkernel_core.store import RunStore
from maxkernel_core.testing import FakeBackend, FakeLLMProvider, HookRecorder

GOOD = "def computation(x):\n    return pl.pallas_call(...)(x)\n"
BAD = "def computation(x):\n    return x * 2\n"




def test_roles_flow_and_every_step_is_stored(parts):
    pm, agents, store, backend, task = parts
    agents.enqueue(BAD).enqueue_fix(GOOD)
    session = RunSession(pm, store, task, RunConfig(task.id, "test"), backend)
    with HookRecorder(pm) as rec:
        cand = session.implement(session.plan())
        verdict = session.evaluate(cand)
        assert verdict.status is EvalStatus.REJECTED
        assert [e.status for e in store.evaluations(session.run_id)] == [EvalStatus.REJECTED]  # stored already
        fixed = session.debug(cand, verdict, session.history)
        assert fixed.parent_id == cand.id and session.evaluate(fixed).ok
    assert [c.name for c in rec.calls] == ["agent_plan", "agent_implement", "agent_test", "agent_debug", "agent_test"]
    assert rec.getcalls("agent_plan")[0].kwargs["history"] == ()
    result = session.finish()
    assert result.status == "ok" and result.best.candidate.id == fixed.id and result.evaluations == 2
    assert store.get_run(session.run_id).status == "ok"
    # the timing wrapper saw every role call and is gone afterwards
    assert [role for role, _, _ in session.role_log.calls] == ["plan", "implement", "test", "debug", "test"]
    assert not any(name.startswith("maxkernel-role-log") for name in pm.plugin_info)


def test_best_is_fastest_verified_never_a_failed_one(parts):
    pm, agents, store, backend, task = parts
    session = RunSession(pm, store, task, RunConfig(task.id), backend)
    backend.enqueue(
        Evaluation("x", EvalStatus.OK, profile=Profile("x", "cost_model", True, seconds=2.0)),
        Evaluation("x", EvalStatus.INCORRECT, profile=Profile("x", "cost_model", True, seconds=0.1)),
        Evaluation("x", EvalStatus.OK, profile=Profile("x", "cost_model", True, seconds=1.0)),
    )
    agents.enqueue(GOOD, GOOD, GOOD)
    ids = [session.evaluate(session.implement(session.plan())).candidate_id for _ in range(3)]
    assert session.best().candidate.id == ids[2]


def test_no_valid_candidate_is_reported_as_such(parts):
    pm, agents, store, backend, task = parts
    session = RunSession(pm, store, task, RunConfig(task.id), backend)
    agents.enqueue(BAD)
    session.evaluate(session.implement(session.plan()))
    result = session.finish()
    assert result.status == "no_valid_candidate" and result.best is None


def test_resume_restores_history_from_the_store(parts):
    pm, agents, store, backend, task = parts
    first = RunSession(pm, store, task, RunConfig(task.id), backend)
    agents.enqueue(BAD, GOOD)
    for _ in range(2):
        first.evaluate(first.implement(first.plan()))
    first.close()  # as if killed: never finished
    resumed = RunSession(pm, store, task, RunConfig(task.id), backend, run_id=first.run_id)
    assert [a.candidate.id for a in resumed.history] == [a.candidate.id for a in first.history]
    assert resumed.best().candidate.code == GOOD


def test_missing_role_plugin_is_a_clear_error(tmp_path):
    pm = get_plugin_manager(load_entrypoints=False)
    backend = FakeBackend()
    session = RunSession(pm, RunStore(tmp_path / "r.db"), backend.load_task("fake_matmul"),
                         RunConfig("fake_matmul"), backend)
    with pytest.raises(PluginError, match="no plugin answered agent_plan for backend 'fake'"):
        session.plan()


def test_third_party_role_overrides_the_trylast_builtin(parts):
    pm, agents, store, backend, task = parts

    class BetterPlanner:
        @hookimpl
        def agent_plan(self, task):
            from maxkernel_core.records import Plan

            return Plan(task.id, "from the third party")

    pm.register(BetterPlanner(), name="better")
    session = RunSession(pm, store, task, RunConfig(task.id), backend)
    assert session.plan().summary == "from the third party"
    assert agents.plans == []  # the fallback was never asked


def test_llm_calls_are_logged_with_errors(parts):
    pm, agents, store, backend, task = parts
    fake = FakeLLMProvider().enqueue("a reply", ProviderError("rate limited"))
    session = RunSession(pm, store, task, RunConfig(task.id), backend, llms={"default": RoleLLM(fake, None, None, 100)})
    request = LLMRequest((LLMMessage("user", "make it fast"),), role="plan")
    assert session.ctx.complete(request).text == "a reply"
    with pytest.raises(ProviderError):
        session.ctx.complete(request)
    calls = store.llm_calls(session.run_id)
    assert [(c["role"], c["response"], c["error"]) for c in calls] == [
        ("plan", "a reply", None), ("plan", None, "ProviderError: rate limited")]
    assert [r.messages for r in fake.history] == [request.messages] * 2
    assert fake.history[0].max_output_tokens == 100  # the role's settings fill the request


@pytest.mark.parametrize("marked", [{"recheck": True, "transformation": "confirm the best"},
                                    {"transformation": "re-evaluation"}], ids=["field", "stored-before-the-field"])
def test_a_kernel_whose_recheck_failed_is_never_reported(parts, marked):
    """Every re-check of the best failed: the run has no verified kernel, it does not fall back to it. A re-check
    is the ``Provenance.recheck`` field, whatever its words; a run stored before the field said so in words."""
    import attrs

    pm, agents, store, backend, task = parts
    session = RunSession(pm, store, task, RunConfig(task.id), backend)
    backend.enqueue(Evaluation("x", EvalStatus.OK, profile=Profile("x", "cost_model", True, seconds=1.0)),
                    Evaluation("x", EvalStatus.INCORRECT, "failed on the re-check"))
    agents.enqueue(GOOD)
    first = session.implement(session.plan())
    assert session.evaluate(first).ok
    again = attrs.evolve(first, id=f"{first.id}-confirm", parent_id=first.id,
                         provenance=attrs.evolve(first.provenance, **marked))
    assert not session.evaluate(again).ok
    assert session.best() is None
    result = session.finish(best_id=first.id)
    assert result.status == "no_valid_candidate" and result.best is None
    assert result.evaluations == 1 and result.rechecks == 1  # the re-check is named and counted apart


def test_the_budget_is_a_hard_limit_even_for_concurrent_evaluations(parts):
    from concurrent.futures import ThreadPoolExecutor

    from maxkernel_core.errors import BudgetSpent

    pm, agents, store, backend, task = parts
    session = RunSession(pm, store, task, RunConfig(task.id, budget=3), backend)
    agents.enqueue(*[GOOD] * 8)
    candidates = [session.implement(session.plan()) for _ in range(8)]

    def judge(candidate):
        try:
            return session.evaluate(candidate)
        except BudgetSpent:
            return None

    with ThreadPoolExecutor(4) as pool:
        verdicts = list(pool.map(judge, candidates))
    assert sum(v is not None for v in verdicts) == 3 and len(store.evaluations(session.run_id)) == 3
    assert session.budget_left() == 0


def test_past_the_time_limit_no_new_evaluation_starts(parts, monkeypatch):
    from maxkernel_core import session as session_module
    from maxkernel_core.errors import BudgetSpent

    pm, agents, store, backend, task = parts
    session = RunSession(pm, store, task, RunConfig(task.id, time_limit_s=60), backend)
    agents.enqueue(GOOD, GOOD)
    first = session.implement(session.plan())
    assert session.evaluate(first).ok  # within the limit
    later = session._started + 61
    monkeypatch.setattr(session_module.time, "monotonic", lambda: later)
    with pytest.raises(BudgetSpent, match="time limit of 60 s is spent"):
        session.evaluate(session.implement(session.plan()))
    assert len(store.evaluations(session.run_id)) == 1
