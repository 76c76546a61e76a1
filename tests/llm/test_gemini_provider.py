"""The gemini provider, through the real google-genai client, against a fake Gemini REST server.

The SDK is pointed at the fake server with ``MAXKERNEL_GEMINI_BASE_URL``; the
key is a dummy, and the loopback-only guard in conftest fails any attempt to
reach Google.
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
from maxkernel_llm_providers.gemini import GeminiProvider

from . import fake_servers as fs

KEY = "test-gemini-key-0123456789"


def make_request(**options: object) -> LLMRequest:
    return LLMRequest(
        messages=(LLMMessage("system", "You write Pallas kernels."), LLMMessage("user", "Write a matmul."),
                  LLMMessage("assistant", "Here is one."), LLMMessage("user", "Make it faster.")),
        model="gemini-2.5-flash", temperature=0.4, max_output_tokens=512, role="plan", options=dict(options),
    )


@pytest.fixture
def provider(gemini_server: fs.GeminiServer, monkeypatch: pytest.MonkeyPatch) -> GeminiProvider:
    monkeypatch.setenv("MAXKERNEL_GEMINI_BASE_URL", gemini_server.url)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    settings = Settings()
    settings.llm.timeout_s = 1.0
    return GeminiProvider(settings)


def test_registered_through_the_entry_point() -> None:
    assert get_plugin_manager().registries.llm_providers["gemini"].cls is GeminiProvider


def test_normal_reply(provider: GeminiProvider, gemini_server: fs.GeminiServer) -> None:
    gemini_server.enqueue(fs.text("def kernel(): ...", input_tokens=40, output_tokens=8))
    reply = provider.complete(make_request(thinking_budget=1024))
    assert reply.text == "def kernel(): ..."
    assert (reply.input_tokens, reply.output_tokens) == (40, 8)
    assert reply.model == "gemini-fake-001" and reply.finish_reason == "stop" and reply.latency_s > 0
    assert reply.cost_usd is not None and reply.cost_usd > 0  # priced from litellm's bundled table
    (seen,) = gemini_server.requests
    assert seen.path.endswith("/models/gemini-2.5-flash:generateContent")
    assert seen.headers["x-goog-api-key"] == KEY
    assert seen.body["systemInstruction"]["parts"] == [{"text": "You write Pallas kernels."}]
    assert [(c["role"], c["parts"][0]["text"]) for c in seen.body["contents"]] == [
        ("user", "Write a matmul."), ("model", "Here is one."), ("user", "Make it faster.")]
    config = seen.body["generationConfig"]
    assert config["temperature"] == 0.4 and config["maxOutputTokens"] == 512
    thinking = config["thinkingConfig"]
    assert thinking.get("thinkingBudget", thinking.get("thinking_budget")) == 1024


def test_rate_limited_carries_retry_after(provider: GeminiProvider, gemini_server: fs.GeminiServer) -> None:
    gemini_server.enqueue(fs.error(429, {"Retry-After": "7"}))
    with pytest.raises(RateLimited) as info:
        provider.complete(make_request())
    assert info.value.retry_after == 7
    assert len(gemini_server.requests) == 1  # the SDK did not retry on its own


@pytest.mark.parametrize("status", [500, 503])
def test_server_error_is_transient(provider: GeminiProvider, gemini_server: fs.GeminiServer, status: int) -> None:
    gemini_server.enqueue(fs.error(status))
    with pytest.raises(TransientError):
        provider.complete(make_request())
    assert len(gemini_server.requests) == 1


def test_hang_is_a_timeout(provider: GeminiProvider, gemini_server: fs.GeminiServer) -> None:
    gemini_server.enqueue(fs.hang(6))
    start = time.monotonic()
    with pytest.raises(LLMTimeout):
        provider.complete(make_request())
    assert time.monotonic() - start < 4


def test_unreachable_server_is_transient(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAXKERNEL_GEMINI_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    with pytest.raises(TransientError):
        GeminiProvider().complete(make_request())


@pytest.mark.parametrize("item", [fs.malformed(), fs.empty(), fs.text("  ")], ids=["malformed", "no-candidates", "blank"])
def test_unusable_replies_are_bad_replies(provider: GeminiProvider, gemini_server: fs.GeminiServer,
                                          item: fs.Scripted) -> None:
    gemini_server.enqueue(item)
    with pytest.raises(BadReply):
        provider.complete(make_request())


@pytest.mark.parametrize("status", [401, 403])
def test_rejected_key_is_auth_error_naming_the_variable(provider: GeminiProvider, gemini_server: fs.GeminiServer,
                                                        status: int) -> None:
    gemini_server.enqueue(fs.error(status, body={"error": {"code": status, "message": f"key {KEY} is not valid",
                                                           "status": "UNAUTHENTICATED"}}))
    with pytest.raises(AuthError) as info:
        provider.complete(make_request())
    assert "GEMINI_API_KEY" in str(info.value) and KEY not in str(info.value)


def test_invalid_key_400_is_auth_error(provider: GeminiProvider, gemini_server: fs.GeminiServer) -> None:
    """What the Gemini API really sends for a wrong key: 400 INVALID_ARGUMENT 'API key not valid'."""
    gemini_server.enqueue(fs.error(400, body={"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                                        "message": "API key not valid. Please pass a valid API key."}}))
    with pytest.raises(AuthError):
        provider.complete(make_request())


def test_context_too_long(provider: GeminiProvider, gemini_server: fs.GeminiServer) -> None:
    gemini_server.enqueue(fs.context_too_long())
    with pytest.raises(ContextTooLong):
        provider.complete(make_request())


def test_truncated_reply_is_a_reply(provider: GeminiProvider, gemini_server: fs.GeminiServer) -> None:
    gemini_server.enqueue(fs.truncated("def kernel(x):\n    return"))
    reply = provider.complete(make_request())
    assert reply.finish_reason == "length" and reply.text.startswith("def kernel")


def test_core_retry_loop_waits_then_backs_off(provider: GeminiProvider, gemini_server: fs.GeminiServer) -> None:
    gemini_server.enqueue(fs.error(429, {"Retry-After": "2"}), fs.error(500), fs.text("finally"))
    sleeps: list[float] = []
    reply = complete(provider, make_request(), policy=RetryPolicy(max_retries=3, base_delay_s=0.01), sleep=sleeps.append)
    assert reply.text == "finally"
    assert sleeps[0] == 2 and len(sleeps) == 2 and 0 <= sleeps[1] <= 0.02
    assert len(gemini_server.requests) == 3


# --- readiness ----------------------------------------------------------------


def test_missing_key_names_the_variable() -> None:
    ready = GeminiProvider().readiness()
    assert not ready.ready and "GEMINI_API_KEY" in ready.message and "\n" not in ready.message


@pytest.mark.parametrize("var", ["GEMINI_API_KEY", "GOOGLE_API_KEY"])
def test_either_key_is_enough(monkeypatch: pytest.MonkeyPatch, var: str) -> None:
    monkeypatch.setenv(var, KEY)
    assert GeminiProvider().readiness().ready


def test_vertex_needs_a_project(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    ready = GeminiProvider().readiness()
    assert not ready.ready and "GOOGLE_CLOUD_PROJECT" in ready.message
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-project")
    assert GeminiProvider().readiness().ready


def test_no_key_fails_before_any_request() -> None:
    with pytest.raises(AuthError) as info:
        GeminiProvider().complete(make_request())
    assert "GEMINI_API_KEY" in str(info.value)
