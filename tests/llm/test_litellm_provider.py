"""The litellm provider, through the real litellm (and openai) client, against a fake OpenAI server.

Every failure a vendor can produce is scripted on the server, and the test
checks the core's typed error comes out, so the retry loop's decisions
(wait, back off, trim, stop) rest on what real SDK exceptions look like.
"""

from __future__ import annotations

import time

import pytest

from maxkernel_core import LLMMessage, LLMRequest, get_plugin_manager
from maxkernel_core.config import Settings
from maxkernel_core.llm import (
    AuthError,
    BadReply,
    ContextTooLong,
    LLMTimeout,
    RateLimited,
    RetryPolicy,
    TransientError,
    complete,
)
from maxkernel_llm_providers.litellm_provider import LiteLLMProvider

from . import fake_servers as fs

MODEL = "openai/test-model"


def make_request(model: str = MODEL) -> LLMRequest:
    return LLMRequest(
        messages=(LLMMessage("system", "You write Pallas kernels."), LLMMessage("user", "Write a matmul.")),
        model=model, temperature=0.25, max_output_tokens=321, role="implement",
    )


@pytest.fixture
def provider(openai_server: fs.OpenAIServer) -> LiteLLMProvider:
    settings = Settings()
    settings.llm.api_base = openai_server.url + "/v1"
    settings.llm.timeout_s = 1.0
    return LiteLLMProvider(settings)


def test_registered_through_the_entry_point() -> None:
    assert get_plugin_manager().registries.llm_providers["litellm"].cls is LiteLLMProvider


def test_normal_reply(provider: LiteLLMProvider, openai_server: fs.OpenAIServer) -> None:
    openai_server.enqueue(fs.text("def kernel(): ...", input_tokens=42, output_tokens=9))
    reply = provider.complete(make_request())
    assert reply.text == "def kernel(): ..."
    assert (reply.input_tokens, reply.output_tokens) == (42, 9)
    assert reply.model == "test-model" and reply.finish_reason == "stop" and reply.latency_s > 0
    assert reply.cost_usd is None  # litellm cannot price an unknown model: None, not an error
    (seen,) = openai_server.requests
    assert seen.path == "/v1/chat/completions"
    assert seen.body["messages"] == [{"role": "system", "content": "You write Pallas kernels."},
                                     {"role": "user", "content": "Write a matmul."}]
    assert seen.body["temperature"] == 0.25 and seen.body["max_tokens"] == 321


def test_known_model_is_priced(provider: LiteLLMProvider, openai_server: fs.OpenAIServer) -> None:
    openai_server.enqueue(fs.text("ok", input_tokens=1000, output_tokens=100))
    assert provider.complete(make_request("openai/gpt-4o")).cost_usd > 0


def test_rate_limited_carries_retry_after(provider: LiteLLMProvider, openai_server: fs.OpenAIServer) -> None:
    openai_server.enqueue(fs.error(429, {"Retry-After": "7"}))
    with pytest.raises(RateLimited) as info:
        provider.complete(make_request())
    assert info.value.retry_after == 7
    assert len(openai_server.requests) == 1  # the SDK did not retry on its own


@pytest.mark.parametrize("status", [500, 503])
def test_server_error_is_transient(provider: LiteLLMProvider, openai_server: fs.OpenAIServer, status: int) -> None:
    openai_server.enqueue(fs.error(status))
    with pytest.raises(TransientError):
        provider.complete(make_request())
    assert len(openai_server.requests) == 1


def test_hang_is_a_timeout(provider: LiteLLMProvider, openai_server: fs.OpenAIServer) -> None:
    openai_server.enqueue(fs.hang(6))
    start = time.monotonic()
    with pytest.raises(LLMTimeout):
        provider.complete(make_request())
    assert time.monotonic() - start < 4


def test_unreachable_server_is_transient() -> None:
    settings = Settings()
    settings.llm.api_base, settings.llm.timeout_s = "http://127.0.0.1:9/v1", 1.0
    with pytest.raises(TransientError):
        LiteLLMProvider(settings).complete(make_request())


@pytest.mark.parametrize("item", [fs.malformed(), fs.empty(), fs.text("   ")], ids=["malformed", "no-choices", "blank"])
def test_unusable_replies_are_bad_replies(provider: LiteLLMProvider, openai_server: fs.OpenAIServer,
                                          item: fs.Scripted) -> None:
    openai_server.enqueue(item)
    with pytest.raises(BadReply):
        provider.complete(make_request())


def test_rejected_key_is_auth_error_naming_the_variable(provider: LiteLLMProvider, openai_server: fs.OpenAIServer,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secretsecret123456")
    openai_server.enqueue(fs.error(401, body={"error": {"message": "Incorrect API key provided: sk-secretsecret123456"}}))
    with pytest.raises(AuthError) as info:
        provider.complete(make_request())
    assert "OPENAI_API_KEY" in str(info.value)
    assert "secretsecret" not in str(info.value)
    assert openai_server.requests[0].headers["authorization"] == "Bearer sk-secretsecret123456"


def test_context_too_long(provider: LiteLLMProvider, openai_server: fs.OpenAIServer) -> None:
    openai_server.enqueue(fs.context_too_long())
    with pytest.raises(ContextTooLong):
        provider.complete(make_request())


def test_truncated_reply_is_a_reply(provider: LiteLLMProvider, openai_server: fs.OpenAIServer) -> None:
    openai_server.enqueue(fs.truncated("def kernel(x):\n    return"))
    reply = provider.complete(make_request())
    assert reply.finish_reason == "length" and reply.text.startswith("def kernel")


def test_core_retry_loop_waits_then_backs_off(provider: LiteLLMProvider, openai_server: fs.OpenAIServer) -> None:
    openai_server.enqueue(fs.error(429, {"Retry-After": "2"}), fs.error(500), fs.text("finally"))
    sleeps: list[float] = []
    reply = complete(provider, make_request(), policy=RetryPolicy(max_retries=3, base_delay_s=0.01), sleep=sleeps.append)
    assert reply.text == "finally"
    assert sleeps[0] == 2 and len(sleeps) == 2 and 0 <= sleeps[1] <= 0.02
    assert len(openai_server.requests) == 3


def test_path_without_v1_prefix(openai_server: fs.OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAXKERNEL_LLM_API_BASE", openai_server.url)  # env override, no settings at all
    openai_server.enqueue(fs.text("hi"))
    assert LiteLLMProvider().complete(make_request()).text == "hi"
    assert openai_server.requests[0].path == "/chat/completions"


# --- readiness ----------------------------------------------------------------


def settings_for(model: str, api_base: str | None = None) -> Settings:
    settings = Settings()
    settings.run.provider, settings.run.model, settings.llm.api_base = "litellm", model, api_base
    return settings


def test_missing_key_names_the_variable() -> None:
    ready = LiteLLMProvider(settings_for("anthropic/claude-sonnet-4-5")).readiness()
    assert not ready.ready and "ANTHROPIC_API_KEY" in ready.message and "\n" not in ready.message


def test_role_models_are_checked_too() -> None:
    settings = settings_for("ollama/qwen2.5-coder")
    settings.llm.roles["plan"] = {"provider": "litellm", "model": "openai/gpt-4.1"}
    ready = LiteLLMProvider(settings).readiness()
    assert not ready.ready and "OPENAI_API_KEY" in ready.message and "ollama" not in ready.message


def test_key_in_env_is_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-not-a-key")
    assert LiteLLMProvider(settings_for("anthropic/claude-sonnet-4-5")).readiness().ready


@pytest.mark.parametrize("model,api_base", [("openai/my-model", "http://localhost:8000/v1"),
                                            ("ollama/qwen2.5-coder", None), ("hosted_vllm/qwen", None)])
def test_local_servers_need_no_key(model: str, api_base: str | None) -> None:
    assert LiteLLMProvider(settings_for(model, api_base)).readiness().ready


# --- the shared error helpers ---------------------------------------------------


def test_retry_after_forms() -> None:
    from email.utils import formatdate

    from maxkernel_llm_providers.errors import retry_after

    assert retry_after({"Retry-After": "3"}) == 3
    assert retry_after({"retry-after-ms": "1500", "Retry-After": "9"}) == 1.5
    assert 50 < retry_after({"Retry-After": formatdate(time.time() + 60, usegmt=True)}) <= 60
    assert retry_after({"Retry-After": "soon"}) is None and retry_after(None) is None


def test_scrub_hides_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    from maxkernel_llm_providers.errors import scrub

    monkeypatch.setenv("MISTRAL_API_KEY", "plain-secret-value")
    out = scrub("bad key plain-secret-value, also sk-abcdefghijkl and AIzaSyA1234567890abcdefghij\nsecond line")
    assert "secret" not in out and "sk-abc" not in out and "AIza" not in out and "\n" not in out
