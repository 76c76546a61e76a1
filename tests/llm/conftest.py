"""Fixtures for the LLM provider tests: fake vendor servers and a loopback-only network.

``no_outside_network`` is autouse: any attempt to resolve or connect to a host
other than loopback is refused and fails the test, so a provider that quietly
calls a real vendor (or an SDK that fetches a price list) is caught, not just
slow. The refusal is a BaseException so that no SDK's ``except Exception``
turns it into a retryable error, and it is also recorded and checked at
teardown in case something swallows it anyway.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from .fake_servers import GeminiServer, OpenAIServer

LOOPBACK = {"127.0.0.1", "::1", "localhost"}

#: Env vars that could point a provider at a real vendor or change its behaviour.
PROVIDER_ENV = (
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_API_KEY", "GEMINI_API_KEY",
    "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
    "MAXKERNEL_LLM_API_BASE", "MAXKERNEL_GEMINI_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
    "http_proxy", "https_proxy", "all_proxy",
)


class NetworkBlocked(BaseException):
    """Raised on any non-loopback resolve or connect during an LLM test."""


def _host(address: Any) -> str:
    return str(address[0]) if isinstance(address, tuple) else str(address)


@pytest.fixture(autouse=True)
def no_outside_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    blocked: list[str] = []
    real_connect = socket.socket.connect
    real_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6) and _host(address) not in LOOPBACK:
            blocked.append(repr(address))
            raise NetworkBlocked(f"test tried to reach {address!r}; only the fake servers may be used")
        return real_connect(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None and str(host) not in LOOPBACK:
            blocked.append(repr(host))
            raise NetworkBlocked(f"test tried to resolve {host!r}; only the fake servers may be used")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield
    assert not blocked, f"the test tried to leave loopback: {', '.join(blocked)}"


@pytest.fixture(autouse=True)
def clean_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    server = OpenAIServer().start()
    yield server
    server.stop()


@pytest.fixture
def gemini_server() -> Iterator[GeminiServer]:
    server = GeminiServer().start()
    yield server
    server.stop()
