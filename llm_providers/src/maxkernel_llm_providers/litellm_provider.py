"""The ``litellm`` provider: any model litellm names (``anthropic/...``, ``openai/...``, ``ollama/...``,
``hosted_vllm/...``) and any OpenAI-compatible server given as ``llm.api_base``.

Retries are the core's job (one policy, every attempt logged and charged), so
litellm's own retries are off: ``num_retries=0`` for litellm's wrapper and
``max_retries=0`` for the openai client underneath. litellm is imported on
first use only (about 3 s), after ``LITELLM_LOCAL_MODEL_COST_MAP`` is set so
the import reads the bundled price list instead of fetching one.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any, ClassVar
from urllib.parse import urlparse

from maxkernel_core import LLMProvider, LLMRequest, LLMResponse, Readiness, hookimpl
from maxkernel_core.llm import BadReply, ContextTooLong, LLMError

from . import llm_setting
from .errors import from_status, from_transport, scrub

API_BASE_ENV = "MAXKERNEL_LLM_API_BASE"
#: litellm model prefixes served locally by default: no key needed.
KEYLESS_PREFIXES = ("ollama", "ollama_chat", "hosted_vllm", "lm_studio", "llamafile")
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "0.0.0.0")
#: A placeholder key for local servers: the openai client refuses to send a request without one.
LOCAL_KEY = "no-key-needed"
DEFAULT_TIMEOUT_S = 180.0

_import_lock = threading.Lock()


def load_litellm() -> ModuleType:
    """Import litellm quietly and without network; cached by Python after the first call."""
    with _import_lock:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        # litellm's typed dicts make pydantic warn on first use; noise for our users, not theirs to fix
        warnings.filterwarnings("ignore", message=r".*`ReadOnly` qualifier", category=UserWarning)
        import litellm

        litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banners on errors
        return litellm


def is_local(api_base: str | None) -> bool:
    return bool(api_base) and (urlparse(api_base).hostname or "") in LOCAL_HOSTS


def _prefix(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else ""


class LiteLLMProvider(LLMProvider):
    """Completions through ``litellm.completion``; errors mapped to the core's typed errors."""

    name: ClassVar[str] = "litellm"
    key_env_vars: ClassVar[tuple[str, ...]] = ()  # depends on the model; see readiness()

    def __init__(self, settings: Any = None) -> None:
        super().__init__(settings)
        self.api_base: str | None = llm_setting(settings, "api_base") or os.environ.get(API_BASE_ENV) or None
        self.timeout_s = float(llm_setting(settings, "timeout_s", DEFAULT_TIMEOUT_S))

    # --- readiness -------------------------------------------------------------

    def configured_models(self) -> list[str]:
        """Models the settings route to this provider (``run.model``, ``llm.roles.*.model``)."""
        run = getattr(self.settings, "run", None)
        default_provider = getattr(run, "provider", None)
        run_model = getattr(run, "model", None)
        models = [run_model] if run_model and default_provider == self.name else []
        for table in (llm_setting(self.settings, "roles", {}) or {}).values():
            if table.get("provider", default_provider) == self.name:
                model = table.get("model") or (run_model if default_provider == self.name else None)
                models.append(model)
        return sorted({m for m in models if m})

    def missing_keys(self, model: str) -> list[str]:
        """Env vars ``model`` needs that are unset (none for local servers and keyless prefixes)."""
        if is_local(self.api_base) or _prefix(model) in KEYLESS_PREFIXES:
            return []
        try:
            found = load_litellm().validate_environment(model=model, api_base=self.api_base)
        except Exception:  # an unknown provider prefix: completion() will say so clearly
            return []
        return list(found.get("missing_keys") or [])

    def readiness(self) -> Readiness:
        problems = []
        if not self.configured_models():
            return Readiness(False, "set run.model (or llm.roles.ROLE.model) to a litellm model string, "
                                    "e.g. anthropic/claude-sonnet-4-5 or hosted_vllm/MODEL with llm.api_base")
        for model in self.configured_models():
            missing = self.missing_keys(model)
            if missing:
                joiner = " or " if set(missing) == {"GOOGLE_API_KEY", "GEMINI_API_KEY"} else " and "
                problems.append(f"set {joiner.join(missing)} for model {model!r}")
        if problems:
            return Readiness(False, "; ".join(problems) + f" (or point llm.api_base / {API_BASE_ENV} "
                             "at a local OpenAI-compatible server)")
        return Readiness(True)

    def key_hint(self, model: str) -> str:
        """Which variable holds the key for ``model``, for AuthError messages."""
        names = self.missing_keys(model)
        if not names:
            try:
                provider = load_litellm().get_llm_provider(model)[1]
            except Exception:
                provider = _prefix(model) or "openai"
            names = [f"{provider.upper()}_API_KEY"]
        hint = " or ".join(names)
        if not self.api_base:
            return hint
        where = urlparse(self.api_base)  # host and port only: a URL can carry user:password
        port = f":{where.port}" if where.port else ""
        return f"{hint} (the key {where.scheme}://{where.hostname}{port} expects)"

    # --- completion ------------------------------------------------------------

    def build_kwargs(self, request: LLMRequest) -> dict[str, Any]:
        """The ``litellm.completion`` arguments for ``request`` (no SDK retries, our timeout)."""
        if not request.model:
            raise LLMError("provider 'litellm' needs a model: set run.model or llm.roles.ROLE.model "
                           "(e.g. anthropic/claude-sonnet-4-5, openai/gpt-4.1, ollama/qwen2.5-coder)")
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "timeout": self.timeout_s,
            "num_retries": 0,
            "max_retries": 0,
            "drop_params": True,  # a sampling option one model lacks is dropped, not a failed call
        }
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.max_output_tokens:
            kwargs["max_tokens"] = request.max_output_tokens
        if self.api_base:
            kwargs["api_base"] = self.api_base
            if is_local(self.api_base) and not self._has_key(request.model):
                kwargs["api_key"] = LOCAL_KEY
        options = dict(request.options or {})
        if options.get("thinking_budget"):
            kwargs["thinking"] = {"type": "enabled", "budget_tokens": int(options["thinking_budget"])}
        for key in ("reasoning_effort", "top_p", "seed", "stop"):
            if options.get(key) is not None:
                kwargs[key] = options[key]
        return kwargs

    def _has_key(self, model: str) -> bool:
        provider = _prefix(model) or "openai"
        return bool(os.environ.get(f"{provider.upper()}_API_KEY"))

    def complete(self, request: LLMRequest) -> LLMResponse:
        litellm = load_litellm()
        kwargs = self.build_kwargs(request)
        start = time.monotonic()
        try:
            reply = litellm.completion(**kwargs)
        except Exception as exc:
            raise self.map_error(exc, request.model or "") from exc
        latency = time.monotonic() - start
        choices = getattr(reply, "choices", None) or []
        if not choices:
            raise BadReply(f"model {request.model!r} answered with no choices")
        message = getattr(choices[0], "message", None)
        text = getattr(message, "content", None) or ""
        finish = str(getattr(choices[0], "finish_reason", None) or "")
        if not text.strip():
            raise BadReply(f"model {request.model!r} answered with empty text (finish_reason {finish or 'unset'})")
        usage = getattr(reply, "usage", None)
        return LLMResponse(
            text=text,
            model=str(getattr(reply, "model", None) or request.model),
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=self.cost(reply),
            latency_s=latency,
            finish_reason=finish,
        )

    @staticmethod
    def cost(reply: Any) -> float | None:
        """litellm's price for the reply; None when it cannot price the model (never raises)."""
        try:
            value = load_litellm().completion_cost(completion_response=reply)
        except Exception:
            return None
        return float(value) if value is not None else None

    def map_error(self, exc: Exception, model: str) -> LLMError:
        """litellm's (openai-derived) exception as the core's typed error."""
        if isinstance(exc, LLMError):
            return exc
        litellm = load_litellm()
        vendor = f"litellm ({model or 'no model'})"
        if isinstance(exc, litellm.ContextWindowExceededError):
            return ContextTooLong(f"{vendor}: {scrub(str(exc))}")
        transport = from_transport(exc, vendor=vendor)
        if transport is not None:
            return transport
        response = getattr(exc, "response", None)
        headers = getattr(exc, "litellm_response_headers", None) or getattr(response, "headers", None)
        status = getattr(exc, "status_code", None)
        mapped = from_status(status if isinstance(status, int) else None, str(exc), headers=headers,
                             vendor=vendor, key_hint=self.key_hint(model))
        return mapped or LLMError(f"{vendor} failed: {scrub(f'{type(exc).__name__}: {exc}')}")


@hookimpl
def register_llm_providers(register: Callable[..., None]) -> None:
    register(LiteLLMProvider)
