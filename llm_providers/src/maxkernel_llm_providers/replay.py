"""``replay``: plays back a JSONL transcript recorded by a run (``llm.record = "run.jsonl"``).

For demos, regression tests and bug reports: a run replayed against its own
transcript asks the same questions and gets the same answers, so it writes the
same candidates with no key and no network. Replies are handed out in recorded
order, per role.
"""

from __future__ import annotations

import json
import os
import threading
from collections import defaultdict, deque
from pathlib import Path

from maxkernel_core import LLMProvider, LLMRequest, LLMResponse, Readiness, hookimpl
from maxkernel_core.llm import LLMError
from maxkernel_core.serialize import from_json

ENV_VAR = "MAXKERNEL_LLM_REPLAY"


class ReplayExhausted(LLMError):
    """The transcript has no more replies for a role (not retried: it will not grow)."""


class ReplayProvider(LLMProvider):
    name = "replay"

    def __init__(self, settings=None) -> None:
        super().__init__(settings)
        llm = getattr(settings, "llm", None)
        configured = getattr(llm, "replay", None) or os.environ.get(ENV_VAR)
        self.path = Path(configured).expanduser() if configured else None
        self._queues: dict[str, deque[LLMResponse]] | None = None
        self._lock = threading.Lock()

    def readiness(self) -> Readiness:
        if self.path is None:
            return Readiness(False, f"set llm.replay (or {ENV_VAR}) to a transcript recorded with llm.record")
        if not self.path.is_file():
            return Readiness(False, f"the replay transcript {self.path} does not exist")
        return Readiness(True)

    def _load(self) -> dict[str, deque[LLMResponse]]:
        queues: dict[str, deque[LLMResponse]] = defaultdict(deque)
        for number, line in enumerate(self.path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                request = from_json(entry["request"], LLMRequest)
                response = from_json(entry["response"], LLMResponse)
            except (ValueError, KeyError, TypeError) as exc:
                raise LLMError(f"{self.path}:{number} is not a transcript line ({exc})") from exc
            queues[request.role].append(response)
        return queues

    def complete(self, request: LLMRequest) -> LLMResponse:
        with self._lock:
            if self._queues is None:
                self._queues = self._load()
            queue = self._queues.get(request.role)
            if not queue:
                raise ReplayExhausted(f"the replay transcript {self.path} has no more {request.role!r} replies")
            return queue.popleft()


@hookimpl
def register_llm_providers(register):
    register(ReplayProvider)
