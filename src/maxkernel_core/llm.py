"""Calling a model robustly: typed failures, retries with backoff, a per-run budget, trimming.

Providers translate their SDK's exceptions into the classes below; this module
decides what to do about them, the same way for every provider:

* :class:`RateLimited` (429): wait ``retry_after`` when the server says, else back off.
* :class:`TransientError` (5xx, connection reset) and :class:`LLMTimeout`: back off and retry.
* :class:`BadReply` (malformed JSON, empty body): retry; the next sample may be fine.
* :class:`ContextTooLong`: drop the oldest conversation turns (keeping the system
  prompt and the latest request) and try again.
* :class:`AuthError`: never retried; one line naming what to set.

Backoff is exponential with full jitter, capped. Every attempt, failed ones
too, goes to ``log`` (the run store), and :class:`Budget` stops the run
cleanly once calls, tokens or money are spent.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

import attrs
from attrs import define, frozen

from .errors import MaxKernelError, ProviderError, ServiceFailure
from .interfaces import LLMProvider, LLMRequest, LLMResponse


class LLMError(ProviderError, ServiceFailure):
    """A model call failed; subclasses say whether and how to retry. Exit 3: the service, not the input."""

    retryable = False
    exit_code = 3


class RateLimited(LLMError):
    retryable = True

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TransientError(LLMError):
    retryable = True


class LLMTimeout(LLMError):
    retryable = True


class BadReply(LLMError):
    """The service answered, but not with a usable completion (malformed, empty)."""

    retryable = True


class ContextTooLong(LLMError):
    """The prompt is over the model's context window."""


class AuthError(LLMError):
    """Missing or rejected credentials: the user fixes the key (exit 2)."""

    exit_code = 2


class BudgetExceeded(MaxKernelError):
    """The run's budget of calls, tokens or money is spent; the run stops cleanly (exit 1)."""

    exit_code = 1


@frozen
class RetryPolicy:
    max_retries: int = 5
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2**attempt)]."""
        return rng.uniform(0, min(self.max_delay_s, self.base_delay_s * 2 ** attempt))


@define
class Budget:
    """Calls, tokens and dollars a run may spend; None means unlimited. Thread-safe."""

    max_calls: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    _lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)

    def check(self) -> None:
        with self._lock:
            spent = [
                f"{self.calls} of {self.max_calls} calls" if self.max_calls is not None and self.calls >= self.max_calls else "",
                f"{self.tokens} of {self.max_tokens} tokens" if self.max_tokens is not None and self.tokens >= self.max_tokens else "",
                f"${self.cost_usd:.2f} of ${self.max_cost_usd:.2f}" if self.max_cost_usd is not None
                and self.cost_usd >= self.max_cost_usd else "",
            ]
        spent = [s for s in spent if s]
        if spent:
            raise BudgetExceeded(f"the LLM budget is spent ({', '.join(spent)}); raise llm.max_calls / "
                                 "llm.max_tokens / llm.max_cost_usd, or resume the run with a larger budget")

    def charge(self, response: LLMResponse | None) -> None:
        with self._lock:
            self.calls += 1
            if response is not None:
                self.tokens += response.input_tokens + response.output_tokens
                self.cost_usd += response.cost_usd or 0.0


def trim_history(request: LLMRequest) -> LLMRequest | None:
    """Drop the oldest turn after the system prompt; None when nothing is left to drop."""
    messages = list(request.messages)
    first = 1 if messages and messages[0].role == "system" else 0
    if len(messages) - first <= 1:
        return None
    del messages[first]
    if len(messages) - first > 1 and messages[first].role == "assistant":
        del messages[first]  # keep turns paired: never start the history with a model reply
    return attrs.evolve(request, messages=tuple(messages))


Log = Callable[[LLMRequest, "LLMResponse | None", "str | None", float], None]


def complete(
    provider: LLMProvider,
    request: LLMRequest,
    *,
    policy: RetryPolicy = RetryPolicy(),
    budget: Budget | None = None,
    log: Log | None = None,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    on_retry: Callable[[int, str], None] | None = None,
) -> LLMResponse:
    """One completion, retried and trimmed as the failure requires; every attempt logged and charged.

    ``on_retry(n, error)`` is told before the n-th retry's wait (the live line shows it)."""
    rng = rng or random.Random()
    budget = budget or Budget()
    attempt = 0
    while True:
        budget.check()
        start = time.monotonic()
        try:
            response = provider.complete(request)
        except Exception as exc:  # logged whatever it is; only LLMError says how to go on
            latency = time.monotonic() - start
            budget.charge(None)
            if log:
                log(request, None, f"{type(exc).__name__}: {exc}", latency)
            if not isinstance(exc, LLMError):
                raise
            if isinstance(exc, ContextTooLong):
                trimmed = trim_history(request)
                if trimmed is None:
                    raise ContextTooLong(f"{exc} (and no earlier turns are left to drop)") from exc
                request = trimmed
                continue
            if not exc.retryable or attempt >= policy.max_retries:
                if exc.retryable:
                    raise type(exc)(f"{exc} (gave up after {attempt + 1} attempts)") from exc
                raise
            retry_after = getattr(exc, "retry_after", None)
            if on_retry is not None:
                on_retry(attempt + 1, type(exc).__name__)
            sleep(min(retry_after, policy.max_delay_s) if retry_after else policy.delay(attempt, rng))
            attempt += 1
            continue
        latency = time.monotonic() - start
        response = response if response.latency_s else attrs.evolve(response, latency_s=latency)
        budget.charge(response)
        if log:
            log(request, response, None, latency)
        return response
