"""The ``gemini`` provider: Gemini models through the google-genai SDK (API key or Vertex AI).

Why the SDK and not litellm: it is Google's own client, it tracks Gemini
features first (thinking budgets, usage with thought tokens), and Vertex AI
auth comes with it. Its retries are switched off (``HttpRetryOptions(attempts=1)``)
because the core retries with one policy for every provider. The client is
built once per provider and kept: google-genai closes its HTTP client when the
``Client`` object is collected, so it must outlive every call.

``MAXKERNEL_GEMINI_BASE_URL`` points the SDK at another host (a proxy, or the
tests' fake server); the SDK appends ``/{api_version}/models/{model}:generateContent``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

from maxkernel_core import LLMProvider, LLMRequest, LLMResponse, Readiness, hookimpl
from maxkernel_core.llm import AuthError, BadReply, LLMError

from . import env_flag, llm_setting
from .errors import from_status, from_transport, scrub
from .litellm_provider import LOCAL_KEY, is_local

BASE_URL_ENV = "MAXKERNEL_GEMINI_BASE_URL"
DEFAULT_MODEL = "gemini-2.5-flash"
DEFAULT_TIMEOUT_S = 180.0
#: Gemini's finish reasons in the OpenAI words litellm uses, so callers check one vocabulary.
FINISH = {"STOP": "stop", "MAX_TOKENS": "length"}


class GeminiProvider(LLMProvider):
    """``client.models.generate_content`` with system instruction, sampling and thinking options."""

    name: ClassVar[str] = "gemini"
    key_env_vars: ClassVar[tuple[str, ...]] = ("GEMINI_API_KEY", "GOOGLE_API_KEY")

    def __init__(self, settings: Any = None) -> None:
        super().__init__(settings)
        self.base_url: str | None = os.environ.get(BASE_URL_ENV) or llm_setting(settings, "gemini_base_url")
        self.timeout_s = float(llm_setting(settings, "timeout_s", DEFAULT_TIMEOUT_S))
        self._client: Any = None
        self._lock = threading.Lock()

    @staticmethod
    def api_key() -> str | None:
        return os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY") or None

    @staticmethod
    def vertex() -> bool:
        return env_flag("GOOGLE_GENAI_USE_VERTEXAI")

    def readiness(self) -> Readiness:
        if self.vertex():
            if os.environ.get("GOOGLE_CLOUD_PROJECT") or self.api_key():
                return Readiness(True)
            return Readiness(False, "set GOOGLE_CLOUD_PROJECT (and GOOGLE_CLOUD_LOCATION) to use provider "
                             "'gemini' on Vertex AI, or unset GOOGLE_GENAI_USE_VERTEXAI and set GEMINI_API_KEY")
        if self.api_key() or is_local(self.base_url):
            return Readiness(True)
        return Readiness(False, "set GEMINI_API_KEY (or GOOGLE_API_KEY) to use provider 'gemini' "
                         "(or GOOGLE_GENAI_USE_VERTEXAI=true with GOOGLE_CLOUD_PROJECT for Vertex AI)")

    def client(self) -> Any:
        """The SDK client, built on first use (importing google.genai is not free)."""
        with self._lock:
            if self._client is None:
                from google import genai
                from google.genai import types

                options = types.HttpOptions(
                    base_url=self.base_url, timeout=int(self.timeout_s * 1000),  # milliseconds
                    retry_options=types.HttpRetryOptions(attempts=1),
                )
                if self.vertex() and os.environ.get("GOOGLE_CLOUD_PROJECT"):
                    self._client = genai.Client(
                        vertexai=True, project=os.environ["GOOGLE_CLOUD_PROJECT"],
                        location=os.environ.get("GOOGLE_CLOUD_LOCATION", "global"), http_options=options)
                else:
                    key = self.api_key() or (LOCAL_KEY if is_local(self.base_url) else None)
                    if key is None:
                        raise AuthError(self.readiness().message)
                    self._client = genai.Client(api_key=key, vertexai=self.vertex() or None, http_options=options)
            return self._client

    @staticmethod
    def build_call(request: LLMRequest) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """(contents, config) for ``generate_content``: system turns become ``system_instruction``."""
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        contents = [{"role": "model" if m.role == "assistant" else "user", "parts": [{"text": m.content}]}
                    for m in request.messages if m.role != "system"]
        config: dict[str, Any] = {}
        if system:
            config["system_instruction"] = system
        if request.temperature is not None:
            config["temperature"] = request.temperature
        if request.max_output_tokens:
            config["max_output_tokens"] = request.max_output_tokens
        options = dict(request.options or {})
        thinking = {k: options[k] for k in ("thinking_budget", "include_thoughts", "thinking_level")
                    if options.get(k) is not None}
        if thinking:
            config["thinking_config"] = thinking
        for key in ("top_p", "top_k", "seed", "stop_sequences"):
            if options.get(key) is not None:
                config[key] = options[key]
        return contents, config

    def complete(self, request: LLMRequest) -> LLMResponse:
        model = request.model or DEFAULT_MODEL
        contents, config = self.build_call(request)
        client = self.client()
        start = time.monotonic()
        try:
            reply = client.models.generate_content(model=model, contents=contents, config=config or None)
        except Exception as exc:
            raise self.map_error(exc) from exc
        latency = time.monotonic() - start
        return self.to_response(reply, model, latency)

    def to_response(self, reply: Any, model: str, latency: float) -> LLMResponse:
        """Text from the first candidate's non-thought parts; BadReply when there is none."""
        candidates = getattr(reply, "candidates", None) or []
        if not candidates:
            feedback = getattr(reply, "prompt_feedback", None)
            why = getattr(getattr(feedback, "block_reason", None), "value", None)
            raise BadReply(f"gemini model {model!r} answered with no candidates"
                           + (f" (prompt blocked: {why})" if why else ""))
        candidate = candidates[0]
        raw_finish = getattr(candidate.finish_reason, "value", candidate.finish_reason) or ""
        finish = FINISH.get(str(raw_finish), str(raw_finish).lower())
        parts = getattr(getattr(candidate, "content", None), "parts", None) or []
        text = "".join(p.text for p in parts if getattr(p, "text", None) and not getattr(p, "thought", False))
        if not text.strip():
            hint = " (the output limit was spent before any text: raise max_output_tokens)" if finish == "length" else ""
            raise BadReply(f"gemini model {model!r} answered with empty text (finish_reason {finish or 'unset'}){hint}")
        usage = getattr(reply, "usage_metadata", None)
        input_tokens = int(getattr(usage, "prompt_token_count", 0) or 0)
        # thinking tokens are billed as output
        output_tokens = int(getattr(usage, "candidates_token_count", 0) or 0) + int(
            getattr(usage, "thoughts_token_count", 0) or 0)
        return LLMResponse(text=text, model=str(getattr(reply, "model_version", None) or model),
                           input_tokens=input_tokens, output_tokens=output_tokens,
                           cost_usd=self.cost(model, input_tokens, output_tokens), latency_s=latency,
                           finish_reason=finish)

    @staticmethod
    def cost(model: str, input_tokens: int, output_tokens: int) -> float | None:
        """Price from litellm's bundled table (it is a dependency anyway); None when unknown."""
        from .litellm_provider import load_litellm

        try:  # first use imports litellm (seconds, once per process)
            prompt, completion = load_litellm().cost_per_token(
                model=f"gemini/{model.removeprefix('models/')}", prompt_tokens=input_tokens,
                completion_tokens=output_tokens)
        except Exception:
            return None
        return float(prompt + completion)

    def map_error(self, exc: Exception) -> LLMError:
        """google-genai's APIError (with its HTTP response) or httpx's transport error, typed."""
        if isinstance(exc, LLMError):
            return exc
        from google.genai import errors as genai_errors

        if isinstance(exc, genai_errors.APIError):
            headers = getattr(getattr(exc, "response", None), "headers", None)
            key_hint = ("GOOGLE_CLOUD_PROJECT and your gcloud credentials" if self.vertex()
                        else "GEMINI_API_KEY (or GOOGLE_API_KEY)")
            mapped = from_status(exc.code, f"{exc.status or ''} {exc.message or exc}", headers=headers,
                                 vendor="gemini", key_hint=key_hint)
            if mapped is not None:
                return mapped
        if isinstance(exc, genai_errors.UnknownApiResponseError):
            return BadReply(f"gemini sent a reply that is not valid JSON ({scrub(str(exc))})")
        transport = from_transport(exc, vendor="gemini")
        return transport or LLMError(f"gemini failed: {scrub(f'{type(exc).__name__}: {exc}')}")


@hookimpl
def register_llm_providers(register: Callable[..., None]) -> None:
    register(GeminiProvider)
