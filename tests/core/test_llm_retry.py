"""The core's handling of model failures: retries, Retry-After, budget, trimming, logging."""

import random

import pytest

from maxkernel_core import LLMMessage, LLMRequest, LLMResponse
from maxkernel_core.config import load_settings
from maxkernel_core.errors import ProviderError, UnknownPluginError
from maxkernel_core.llm import (
    AuthError, BadReply, Budget, BudgetExceeded, ContextTooLong, RateLimited, RetryPolicy, TransientError, complete,
    trim_history,
)
from maxkernel_core.llm_roles import resolve_role_llms
from maxkernel_core.plugins import get_plugin_manager
from maxkernel_core.testing import FakeLLMProvider, registered_plugin

REQ = LLMRequest((LLMMessage("system", "s"), LLMMessage("user", "u1"), LLMMessage("assistant", "a1"),
                  LLMMessage("user", "u2")), role="plan")


def run(fake, **kw):
    sleeps, log = [], []
    response = complete(fake, REQ, policy=kw.pop("policy", RetryPolicy(max_retries=3, base_delay_s=0.5)),
                        sleep=sleeps.append, log=lambda *a: log.append(a), rng=random.Random(0), **kw)
    return response, sleeps, log


def test_retry_after_is_honoured_and_transients_back_off():
    fake = FakeLLMProvider().enqueue(RateLimited("429", retry_after=2.0), TransientError("503"), BadReply("bad json"), "ok")
    response, sleeps, log = run(fake)
    assert response.text == "ok" and len(fake.history) == 4
    assert sleeps[0] == 2.0 and 0 <= sleeps[1] <= 1.0 and 0 <= sleeps[2] <= 2.0  # full jitter, doubling cap
    assert [entry[2] for entry in log] == ["RateLimited: 429", "TransientError: 503", "BadReply: bad json", None]


def test_gives_up_after_max_retries_with_a_clear_message():
    fake = FakeLLMProvider().enqueue(*[TransientError("503")] * 4)
    with pytest.raises(TransientError, match="gave up after 4 attempts"):
        run(fake)


def test_auth_errors_and_unknown_exceptions_are_not_retried_but_logged():
    fake = FakeLLMProvider().enqueue(AuthError("set GEMINI_API_KEY"))
    with pytest.raises(AuthError):
        run(fake)
    sleeps, log = [], []
    with pytest.raises(ValueError):
        complete(FakeLLMProvider().enqueue(ValueError("sdk bug")), REQ, sleep=sleeps.append,
                 log=lambda *a: log.append(a))
    assert sleeps == [] and log[0][2] == "ValueError: sdk bug"


def test_context_too_long_trims_oldest_turns_keeping_system_and_latest():
    fake = FakeLLMProvider().enqueue(ContextTooLong("too long"), "fits now")
    response, sleeps, _ = run(fake)
    assert response.text == "fits now" and sleeps == []
    assert [m.content for m in fake.history[1].messages] == ["s", "u2"]
    assert trim_history(LLMRequest((LLMMessage("system", "s"), LLMMessage("user", "u")))) is None
    with pytest.raises(ContextTooLong, match="no earlier turns are left"):
        complete(FakeLLMProvider().enqueue(*[ContextTooLong("x")] * 3), REQ)


def test_budget_stops_cleanly_before_the_next_call():
    budget = Budget(max_tokens=10)
    fake = FakeLLMProvider().enqueue(LLMResponse("big", input_tokens=8, output_tokens=5, cost_usd=0.5), "never")
    run(fake, budget=budget)
    assert (budget.calls, budget.tokens, budget.cost_usd) == (1, 13, 0.5)
    with pytest.raises(BudgetExceeded, match="13 of 10 tokens.*raise llm.max_calls"):
        run(fake, budget=budget)
    assert len(fake.history) == 1 and BudgetExceeded.exit_code == 1


def test_roles_resolve_per_config_and_missing_keys_fail_before_work(tmp_path, monkeypatch):
    from maxkernel_core import LLMProvider, hookimpl

    class Keyed(LLMProvider):
        name = "keyed"
        key_env_vars = ("KEYED_API_KEY",)

        def complete(self, request):
            raise NotImplementedError

    class Plugin:
        @hookimpl
        def register_llm_providers(self, register):
            register(Keyed)
            register(FakeLLMProvider)

    (tmp_path / "maxkernel.toml").write_text(
        '[run]\nprovider = "fake"\nmodel = "small"\n[llm.roles.plan]\nprovider = "keyed"\nmodel = "big"\n')
    settings = load_settings(tmp_path, env={}).settings
    pm = get_plugin_manager(load_entrypoints=False)
    with registered_plugin(pm, Plugin()):
        monkeypatch.delenv("KEYED_API_KEY", raising=False)
        with pytest.raises(ProviderError, match="provider 'keyed' \\(for plan\\) is not ready: set KEYED_API_KEY"):
            resolve_role_llms(pm.registries, settings)
        monkeypatch.setenv("KEYED_API_KEY", "k")
        llms = resolve_role_llms(pm.registries, settings)
        assert (llms["plan"].provider.name, llms["plan"].model) == ("keyed", "big")
        assert (llms["implement"].provider.name, llms["implement"].model) == ("fake", "small")
        assert llms["implement"].provider is llms["debug"].provider  # one instance per provider
        settings.run.provider = "nope"
        with pytest.raises(UnknownPluginError, match="unknown llm provider 'nope'"):
            resolve_role_llms(pm.registries, settings)
