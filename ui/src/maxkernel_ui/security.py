"""Who may use the UI, and what a page may do.

* **Bind**: 127.0.0.1 by default. Any other address needs a token: one is made and printed at start (or given
  with ``--token``); a request without it is refused (401). Behind an authenticating proxy, bind to 127.0.0.1,
  name the proxy's host with ``--trusted-host`` and, to audit the proxy's user, ``--user-header``.
* **Host**: a request's Host must be the bound address, localhost or a trusted host, which stops a DNS-rebinding
  page from reaching a loopback UI.
* **Pages**: everything from the store is escaped (Jinja2 autoescape); the Content-Security-Policy allows only
  the UI's own script file, so even markup that escaped escaping could not run a script.
* **Changes**: the one state-changing request, answering a hitl question, is a POST carrying the server's CSRF
  token, from the UI's own origin.
"""

from __future__ import annotations

import hashlib
import http.cookies
import ipaddress
import secrets
import urllib.parse

import attrs

COOKIE = "maxkernel_ui_token"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
           (b"x-frame-options", b"DENY"), (b"referrer-policy", b"same-origin")]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@attrs.define
class Access:
    """The server's access rules: its token (None on loopback without one), hosts, proxy user header, CSRF."""

    bind_host: str
    token: str | None = None
    trusted_hosts: tuple[str, ...] = ()
    user_header: str | None = None
    csrf: str = attrs.field(factory=lambda: secrets.token_urlsafe(24))

    def host_allowed(self, host_header: str) -> bool:
        name = host_header.rsplit(":", 1)[0] if not host_header.endswith("]") else host_header
        name = name.strip("[]").lower()
        if name in {h.lower() for h in self.trusted_hosts}:
            return True
        if is_loopback(name) or name == self.bind_host.strip("[]").lower():
            return True
        # bound to every address: any address of this machine may be used, but never a DNS name (rebinding)
        return self.bind_host in ("0.0.0.0", "::") and _is_ip(name)

    def token_ok(self, given: str | None) -> bool:
        return self.token is None or (given is not None and secrets.compare_digest(given, self.token))

    def who(self, headers: dict[str, str]) -> str:
        """The audit line's "who": the proxy's user, the token's fingerprint, or "local"."""
        if self.user_header and headers.get(self.user_header.lower()):
            return f"proxy:{headers[self.user_header.lower()][:64]}"
        if self.token:
            return "token:" + hashlib.sha256(self.token.encode()).hexdigest()[:8]
        return "local"


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def given_token(scope, headers: dict[str, str]) -> tuple[str | None, bool]:
    """The token a request carries (``?token=``, a bearer header, or the cookie, in that order: a URL with a
    fresh token wins over a cookie left by an earlier server), and whether it came in the URL."""
    query = urllib.parse.parse_qs(scope.get("query_string", b"").decode())
    if "token" in query:
        return query["token"][0], True
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip(), False
    cookies = http.cookies.SimpleCookie(headers.get("cookie", ""))
    return (cookies[COOKIE].value, False) if COOKIE in cookies else (None, False)


class Guard:
    """ASGI middleware: Host check, token check (a token in the URL becomes a cookie), security headers."""

    def __init__(self, app, access: Access) -> None:
        self.app, self.access = app, access

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode().lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if not self.access.host_allowed(headers.get("host", "")):
            return await _plain(send, 400, "bad Host header: open the UI by the address it printed at start")
        token, in_url = given_token(scope, headers)
        if not self.access.token_ok(token):
            return await _plain(send, 401, "this UI needs its token: open the URL printed when it started "
                                           "(it ends in ?token=...)")
        if in_url and self.access.token:  # keep it in a cookie and take it out of the address bar and history
            query = urllib.parse.parse_qsl(scope.get("query_string", b"").decode())
            rest = urllib.parse.urlencode([(k, v) for k, v in query if k != "token"])
            cookie = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
            return await _redirect(send, scope["path"] + (f"?{rest}" if rest else ""), cookie)
        scope.setdefault("state", {})["who"] = self.access.who(headers)

        async def with_headers(message):
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + HEADERS
            await send(message)

        await self.app(scope, receive, with_headers)


async def _plain(send, status: int, text: str) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), *HEADERS]})
    await send({"type": "http.response.body", "body": (text + "\n").encode()})


async def _redirect(send, location: str, cookie: str) -> None:
    await send({"type": "http.response.start", "status": 303,
                "headers": [(b"location", location.encode()), (b"set-cookie", cookie.encode()), *HEADERS]})
    await send({"type": "http.response.body", "body": b""})


def same_origin(headers, host: str) -> bool:
    """A POST's Origin (when the browser sends one) is this UI's own."""
    origin = headers.get("origin")
    return origin is None or urllib.parse.urlsplit(origin).netloc == host
