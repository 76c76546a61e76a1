"""Which model answers which role, checked before any work starts; and the transcript recorder.

``run.provider`` / ``run.model`` choose the default; ``[llm.roles.ROLE]`` overrides
per role (a stronger planner, a cheaper implementer). Switching provider is a
config change only.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import attrs
from attrs import frozen

from .config import ROLE_NAMES, Settings
from .errors import ProviderError
from .interfaces import LLMProvider, LLMRequest, LLMResponse
from .serialize import to_json


@frozen
class RoleLLM:
    """The provider instance and sampling settings one role uses."""

    provider: LLMProvider
    model: str | None
    temperature: float | None
    max_output_tokens: int

    def prepare(self, request: LLMRequest) -> LLMRequest:
        """Fill what the request leaves unset from the role's settings."""
        return attrs.evolve(
            request,
            model=request.model or self.model,
            temperature=request.temperature if request.temperature is not None else self.temperature,
            max_output_tokens=request.max_output_tokens or self.max_output_tokens,
        )


def resolve_role_llms(registries, settings: Settings, *, check: bool = True) -> dict[str, RoleLLM]:
    """One RoleLLM per role; providers shared between roles that name the same one.

    :raises UnknownPluginError: a provider name nobody registered.
    :raises ProviderError: a provider is not ready (the message names the env var to set).
    """
    instances: dict[str, LLMProvider] = {}
    result = {}
    for role in ROLE_NAMES:
        table = settings.llm.roles.get(role, {})
        name = table.get("provider", settings.run.provider)
        if name not in instances:
            instances[name] = registries.get("llm_provider", name).cls(settings)
        model = table.get("model", settings.run.model if name == settings.run.provider else None)
        result[role] = RoleLLM(instances[name], model, table.get("temperature", settings.llm.temperature),
                               int(table.get("max_output_tokens", settings.llm.max_output_tokens)))
    if check:
        for name, provider in instances.items():
            ready = provider.readiness()
            if not ready.ready:
                roles = ", ".join(r for r, llm in result.items() if llm.provider is provider)
                raise ProviderError(f"LLM provider {name!r} (for {roles}) is not ready: {ready.message}")
    return result


class TranscriptRecorder:
    """Appends each answered request to a JSONL transcript that the replay provider plays back."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def __call__(self, request: LLMRequest, response: LLMResponse, provider: str) -> None:
        line: dict[str, Any] = {"provider": provider, "request": to_json(request), "response": to_json(response)}
        with self._lock, self.path.open("a") as f:
            f.write(json.dumps(line, sort_keys=True) + "\n")
