"""Starting the UI: in the foreground (``maxkernel ui``) or beside a run (``maxkernel run --ui``)."""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
from collections.abc import Iterator

import uvicorn
from maxkernel_core.errors import ConfigError
from maxkernel_core.store import RunStore

from .app import create_app
from .security import Access, is_loopback

AUDIT_LOG = "ui-audit.log"


def access_for(host: str, token: str | None, no_token: bool, trusted_hosts=(), user_header=None) -> Access:
    """The access rules for a bind: loopback needs no token; any other address always has one."""
    if not is_loopback(host):
        if no_token:
            raise ConfigError(f"refusing to serve {host} without a token: anyone who can reach this machine "
                              "could steer its runs; drop --no-token (a token is made and printed), or bind "
                              "127.0.0.1 behind an authenticating proxy (docs/ui.md)")
        token = token or secrets.token_urlsafe(18)
    return Access(bind_host=host, token=None if no_token else token,
                  trusted_hosts=tuple(trusted_hosts), user_header=user_header)


def bound_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}; choose another --port") from exc
    sock.listen(128)
    return sock


def url_for(host: str, port: int, access: Access) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    shown = f"[{shown}]" if ":" in shown else shown
    return f"http://{shown}:{port}/" + (f"?token={access.token}" if access.token else "")


class Server(uvicorn.Server):
    """uvicorn's server, which tells the open live streams to end before it waits for its connections."""

    def __init__(self, config: uvicorn.Config, watcher) -> None:
        super().__init__(config)
        self.watcher = watcher

    async def shutdown(self, sockets=None) -> None:
        self.watcher.closing = True
        await super().shutdown(sockets)


def make_server(store_home: str | None, access: Access) -> uvicorn.Server:
    store = RunStore.open(store_home)
    app = create_app(store, access, audit=store.path.parent / AUDIT_LOG)
    config = uvicorn.Config(app, log_level=os.environ.get("MAXKERNEL_UI_LOG", "warning"),
                            timeout_graceful_shutdown=2, lifespan="on")
    return Server(config, app.ui.watcher)


@contextlib.contextmanager
def in_background(store_home: str | None, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """The UI in a thread of this process for as long as the block runs; yields its URL."""
    access = access_for(host, None, no_token=False)
    sock = bound_socket(host, port)
    server = make_server(store_home, access)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="maxkernel-ui", daemon=True)
    thread.start()
    try:
        yield url_for(host, sock.getsockname()[1], access)
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()


def serve_forever(store_home: str | None, host: str, port: int, access: Access, on_url) -> None:
    sock = bound_socket(host, port)
    server = make_server(store_home, access)
    on_url(url_for(host, sock.getsockname()[1], access))
    server.run(sockets=[sock])


def default_port() -> int:
    return int(os.environ.get("MAXKERNEL_UI_PORT", "8765"))


