"""Turning vendor failures into the core's typed LLM errors, the same way for every SDK.

The core's retry loop (:func:`maxkernel_core.llm.complete`) decides what to do
from the error's class alone, so the mapping here is the whole of a provider's
error policy: 429 waits ``Retry-After``; 5xx, dropped connections, timeouts and
unparseable bodies are retried; context overflows trim history; bad keys stop
the run with a line naming the variable to set. SDKs wrap the underlying cause
differently (litellm wraps openai wraps httpx; google-genai raises httpx2's
error directly), so we look at the whole ``__cause__``/``__context__`` chain.

Vendor messages can echo credentials, so every message passes :func:`scrub`.
"""

from __future__ import annotations

import email.utils
import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any

from maxkernel_core.llm import (
    AuthError,
    BadReply,
    ContextTooLong,
    LLMError,
    LLMTimeout,
    RateLimited,
    TransientError,
)

#: Env vars whose values must never appear in a message (beyond any ``*_API_KEY``).
SECRET_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")
_KEY_LIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,}|key=[^&\s\"']+)")
_CONTEXT_WORDING = re.compile(
    r"context.{0,24}(length|window|limit|size)|too long|too many (input |prompt )?tokens|"
    r"(input|prompt) token count|maximum (number of )?(input )?tokens|tokens? (limit|exceed)|exceeds? the (maximum|limit)",
    re.IGNORECASE,
)
_CONNECTION_NAMES = {"ConnectError", "NetworkError", "TransportError", "RemoteProtocolError", "ReadError",
                     "WriteError", "APIConnectionError", "ProtocolError"}
MAX_MESSAGE = 300


def scrub(message: str) -> str:
    """One line, at most MAX_MESSAGE characters, with anything key-like replaced by ``***``."""
    secrets = {os.environ[v] for v in os.environ if v in SECRET_ENV or v.endswith("_API_KEY")}
    for secret in sorted((s for s in secrets if len(s) >= 6), key=len, reverse=True):
        message = message.replace(secret, "***")
    message = _KEY_LIKE.sub("***", " ".join(str(message).split()))
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."


def chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its causes, outermost first (bounded: chains can be cyclic)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 20:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def is_timeout(exc: BaseException) -> bool:
    return any(isinstance(e, TimeoutError) or "Timeout" in type(e).__name__ for e in chain(exc))


def is_bad_json(exc: BaseException) -> bool:
    return any(isinstance(e, json.JSONDecodeError) for e in chain(exc))


def is_connection_error(exc: BaseException) -> bool:
    return any(isinstance(e, ConnectionError) or type(e).__name__ in _CONNECTION_NAMES for e in chain(exc))


def retry_after(headers: Mapping[str, str] | Any | None) -> float | None:
    """Seconds to wait from ``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms``; None if absent."""
    if not headers:
        return None
    try:
        lowered = {str(k).lower(): str(v) for k, v in dict(headers).items()}
    except (TypeError, ValueError):
        return None
    if "retry-after-ms" in lowered:
        try:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def from_status(status: int | None, message: str, *, headers: Any = None, vendor: str,
                key_hint: str) -> LLMError | None:
    """The typed error for an HTTP status; None when ``status`` is not an error status.

    :param vendor: who answered, for the message ("litellm (openai)", "gemini").
    :param key_hint: what to set or check when the credentials are rejected.
    """
    if status is None or status < 400:
        return None
    text = scrub(message)
    what = f"{vendor} answered HTTP {status}: {text}"
    if status == 429:
        wait = retry_after(headers)
        return RateLimited(f"{what} (rate limited)", retry_after=wait)
    if status in (401, 403) or (status == 400 and re.search(r"api[ _-]?key", message, re.IGNORECASE)):
        return AuthError(f"{vendor} rejected the credentials (HTTP {status}): check {key_hint}; {text}")
    if status == 408:
        return LLMTimeout(what)
    if status in (400, 413) and _CONTEXT_WORDING.search(message):
        return ContextTooLong(what)
    if status >= 500:
        return TransientError(what)
    return LLMError(what)  # any other 4xx: a request this service will never accept; not retried


def from_transport(exc: BaseException, *, vendor: str) -> LLMError | None:
    """Timeouts, unparseable bodies and dropped connections, recognised anywhere in the cause chain."""
    detail = scrub(f"{type(exc).__name__}: {exc}")
    if is_timeout(exc):
        return LLMTimeout(f"{vendor} did not answer in time ({detail})")
    if is_bad_json(exc):
        return BadReply(f"{vendor} sent a reply that is not valid JSON ({detail})")
    if is_connection_error(exc):
        return TransientError(f"could not reach {vendor} ({detail})")
    return None
