import pytest

from maxkernel_core import Strategy, hookimpl
from maxkernel_core.interfaces import LLMMessage, LLMRequest, LLMResponse
from maxkernel_core.plugins import get_plugin_manager
from maxkernel_core.testing import FakeLLMProvider, HookRecorder, registered_plugin


def test_fake_llm_answers_in_order_and_keeps_history(fake_llm):
    fake_llm.enqueue("one", LLMResponse("two", "m2", 1, 1), RuntimeError("boom"))
    req = LLMRequest((LLMMessage("user", "hello there"),), model="m")
    assert fake_llm.complete(req).text == "one"
    assert fake_llm.complete(req).model == "m2"
    with pytest.raises(RuntimeError, match="boom"):
        fake_llm.complete(req)
    with pytest.raises(AssertionError, match="nothing enqueued"):
        fake_llm.complete(req)
    assert len(fake_llm.history) == 4


def test_fixtures_give_an_isolated_home(mk_home, mk_pm, fake_backend):
    import os

    assert os.environ["MAXKERNEL_HOME"] == str(mk_home)
    assert fake_backend.discover_tasks(mk_home)[0].id == "fake_matmul"
    assert mk_pm.registries is mk_pm.registries  # cached until the plugin set changes


def test_registered_plugin_unregisters_on_exit_even_after_errors():
    pm = get_plugin_manager(load_entrypoints=False)

    class S(Strategy):
        name = "temp"

        def run(self, session):
            raise NotImplementedError

    class P:
        @hookimpl
        def register_strategies(self, register):
            register(S)

    with pytest.raises(ValueError):
        with registered_plugin(pm, P(), name="temp"):
            assert "temp" in pm.registries.strategies
            raise ValueError
    assert "temp" not in pm.registries.strategies and not pm.has_plugin("temp")


def test_hook_recorder_sees_calls_results_and_errors():
    pm = get_plugin_manager(load_entrypoints=False)

    class P:
        @hookimpl
        def agent_profile(self, candidate):
            if candidate == "bad":
                raise RuntimeError("no")
            return "profiled"

    pm.register(P())
    with HookRecorder(pm) as rec:
        assert pm.hook.agent_profile(task=None, candidate="c", ctx=None) == "profiled"
        with pytest.raises(RuntimeError):
            pm.hook.agent_profile(task=None, candidate="bad", ctx=None)
    pm.hook.agent_profile(task=None, candidate="c", ctx=None)  # after exit: not recorded
    calls = rec.getcalls("agent_profile")
    assert [c.result for c in calls] == ["profiled", None] and isinstance(calls[1].error, RuntimeError)
    assert len(rec.calls) == 2
