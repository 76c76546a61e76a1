"""Local HTTP servers that speak the OpenAI chat and Gemini REST shapes, from a script.

The provider tests drive the real litellm and google-genai clients against
these, so what is tested is the whole path (SDK request building, HTTP, SDK
error classes, our mapping) with no network and no vendor. Replies are
vendor-neutral :class:`Scripted` items consumed in order; each server renders
them in its vendor's JSON shape. Every request is recorded (path, headers,
parsed body) for assertions.

Safety: binds 127.0.0.1 only, refuses bodies over 1 MiB, and ``hang`` waits on
an event that :meth:`FakeServer.stop` sets, so no handler thread outlives a test.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 1 << 20
MAX_HANG_S = 10.0


@dataclass
class Scripted:
    """One scripted reply. ``kind``: text, error, context_too_long, hang, malformed, empty."""

    kind: str
    text: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    finish: str = "stop"  # "stop" or "length"; rendered per vendor
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # error body (dict or str); None: the vendor's usual shape
    seconds: float = 0.0


def text(text: str, input_tokens: int = 11, output_tokens: int = 7) -> Scripted:
    return Scripted("text", text=text, input_tokens=input_tokens, output_tokens=output_tokens)


def truncated(text: str, input_tokens: int = 11, output_tokens: int = 7) -> Scripted:
    return Scripted("text", text=text, input_tokens=input_tokens, output_tokens=output_tokens, finish="length")


def error(status: int, headers: dict[str, str] | None = None, body: Any = None) -> Scripted:
    return Scripted("error", status=status, headers=dict(headers or {}), body=body)


def context_too_long() -> Scripted:
    return Scripted("context_too_long", status=400)


def hang(seconds: float = 5.0) -> Scripted:
    return Scripted("hang", seconds=min(seconds, MAX_HANG_S))


def malformed() -> Scripted:
    return Scripted("malformed")


def empty() -> Scripted:
    """A 200 reply with no choices / no candidates."""
    return Scripted("empty")


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeServer:
    """Base: the scripted queue, the request record and the HTTP plumbing; subclasses render."""

    def __init__(self) -> None:
        self.script: deque[Scripted] = deque()
        self.requests: list[Seen] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                server._handle(self)

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def enqueue(self, *items: Scripted) -> None:
        with self._lock:
            self.script.extend(items)

    def start(self) -> FakeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    # --- request handling ---------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._send(h, 413, {"error": {"message": "request too large"}})
            return
        raw = h.rfile.read(length)
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        with self._lock:
            self.requests.append(Seen("POST", h.path, {k.lower(): v for k, v in h.headers.items()}, body))
            item = self.script.popleft() if self.script else None
        if not self.matches(h.path):
            self._send(h, 404, self.render_error(404, f"fake server: no route {h.path}"))
        elif item is None:
            self._send(h, 500, self.render_error(500, "fake server: no scripted reply left"))
        elif item.kind == "hang":
            self._stop.wait(item.seconds)  # the client gives up first; stop() ends the wait
            self._send(h, 200, self.render_text(text("too late"), body))
        elif item.kind == "malformed":
            self._send_raw(h, 200, b'{"choices": [ this is not json', {})
        elif item.kind in ("error", "context_too_long"):
            payload = item.body
            if payload is None:
                payload = (self.render_context_too_long() if item.kind == "context_too_long"
                           else self.render_error(item.status, f"scripted error {item.status}"))
            self._send(h, item.status, payload, item.headers)
        elif item.kind == "empty":
            self._send(h, 200, self.render_empty(body))
        else:
            self._send(h, 200, self.render_text(item, body))

    def _send(self, h: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self._send_raw(h, status, data, headers or {})

    @staticmethod
    def _send_raw(h: BaseHTTPRequestHandler, status: int, data: bytes, headers: dict[str, str]) -> None:
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
        except OSError:  # the client hung up (after a timeout): nothing to tell it
            pass

    # --- vendor shapes (subclasses) -----------------------------------------

    def matches(self, path: str) -> bool:
        raise NotImplementedError

    def render_text(self, item: Scripted, request: Any) -> Any:
        raise NotImplementedError

    def render_empty(self, request: Any) -> Any:
        raise NotImplementedError

    def render_error(self, status: int, message: str) -> Any:
        raise NotImplementedError

    def render_context_too_long(self) -> Any:
        raise NotImplementedError


class OpenAIServer(FakeServer):
    """``POST /v1/chat/completions`` (or ``/chat/completions``), OpenAI's JSON."""

    def matches(self, path: str) -> bool:
        return path.split("?")[0] in ("/v1/chat/completions", "/chat/completions")

    def render_text(self, item: Scripted, request: Any) -> Any:
        model = request.get("model", "fake") if isinstance(request, dict) else "fake"
        choice = {"index": 0, "message": {"role": "assistant", "content": item.text}, "finish_reason": item.finish}
        return {**self.render_empty(request), "model": model, "choices": [choice],
                "usage": {"prompt_tokens": item.input_tokens, "completion_tokens": item.output_tokens,
                          "total_tokens": item.input_tokens + item.output_tokens}}

    def render_empty(self, request: Any) -> Any:
        return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                "model": "fake", "choices": []}

    def render_error(self, status: int, message: str) -> Any:
        kind = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}.get(status, "api_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}

    def render_context_too_long(self) -> Any:
        return {"error": {"message": "This model's maximum context length is 8192 tokens. However, your "
                          "messages resulted in 9100 tokens. Please reduce the length of the messages.",
                          "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}


class GeminiServer(FakeServer):
    """``POST /v1beta/models/{model}:generateContent``, the Gemini REST JSON."""

    ROUTE = re.compile(r"^/v1(beta)?/models/(?P<model>[^/:]+):generateContent$")
    STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
              429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}

    def matches(self, path: str) -> bool:
        return bool(self.ROUTE.match(path.split("?")[0]))

    def render_text(self, item: Scripted, request: Any) -> Any:
        finish = {"stop": "STOP", "length": "MAX_TOKENS"}[item.finish]
        return {"candidates": [{"content": {"role": "model", "parts": [{"text": item.text}]},
                                "finishReason": finish, "index": 0}],
                "usageMetadata": {"promptTokenCount": item.input_tokens, "candidatesTokenCount": item.output_tokens,
                                  "totalTokenCount": item.input_tokens + item.output_tokens},
                "modelVersion": "gemini-fake-001"}

    def render_empty(self, request: Any) -> Any:
        return {"promptFeedback": {"blockReason": "OTHER"},
                "usageMetadata": {"promptTokenCount": 5, "totalTokenCount": 5}, "modelVersion": "gemini-fake-001"}

    def render_error(self, status: int, message: str) -> Any:
        return {"error": {"code": status, "message": message, "status": self.STATUS.get(status, "UNKNOWN")}}

    def render_context_too_long(self) -> Any:
        return {"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum number "
                          "of tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}}
