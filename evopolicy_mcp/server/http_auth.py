"""Bearer-token gate for the streamable HTTP transport (plain ASGI, no framework).

A server that listens beyond loopback must not let anyone on the network spend
an agent's budget, so every HTTP request must carry
``Authorization: Bearer <token>``. A request without it gets 401 before it
reaches the MCP app, so it changes nothing.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import threading
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

__all__ = ["BearerTokenGate", "Tokens", "is_loopback", "new_token", "resolve_token", "serve_http"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_loopback(host: str) -> bool:
    """True when ``host`` is reachable only from this machine."""
    name = host.strip().strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def new_token() -> str:
    return secrets.token_urlsafe(32)


def resolve_token(host: str, given: str | None) -> tuple[str | None, bool]:
    """The token to require and whether it was generated here.

    A token the operator gave is always required. Without one, a loopback
    server needs none and any other address gets a fresh random token.
    """
    if given:
        return given, False
    if is_loopback(host):
        return None, False
    return new_token(), True


class Tokens:
    """The tokens a gate admits, which its owner may add and remove while it serves (a
    shared server: one per bound client). Thread-safe."""

    def __init__(self, tokens: Sequence[str] = ()) -> None:
        self._lock = threading.Lock()
        self._expected: dict[str, bytes] = {}
        for t in tokens:
            self.add(t)

    def add(self, token: str) -> None:
        if not token:
            raise ValueError("an empty bearer token would let every request through")
        with self._lock:
            self._expected[token] = f"Bearer {token}".encode()

    def remove(self, token: str) -> None:
        with self._lock:
            self._expected.pop(token, None)

    def expected(self) -> list[bytes]:
        with self._lock:
            return list(self._expected.values())


class BearerTokenGate:
    """Wrap an ASGI app so each HTTP request needs a bearer token: the one given, or one
    of several (one per client: each client's runs are its own), or those a
    :class:`Tokens` holds at the time of the request."""

    def __init__(self, app: ASGIApp, token: str | Sequence[str] | Tokens) -> None:
        if isinstance(token, Tokens):
            self.tokens = token
        else:
            given = [token] if isinstance(token, str) else list(token)
            if not given or not all(given):
                raise ValueError("an empty bearer token would let every request through")
            self.tokens = Tokens(given)
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._authorized(scope):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            await _unauthorized(send)

    def _authorized(self, scope: Scope) -> bool:
        values = [v for k, v in scope.get("headers", ()) if k.lower() == b"authorization"]
        # A repeated header is ambiguous; refuse it rather than pick one.
        if len(values) != 1:
            return False
        given = values[0].strip()
        # Every token compared, so the time taken says nothing of which one matched.
        return sum(secrets.compare_digest(given, t) for t in self.tokens.expected()) == 1


async def _unauthorized(send: Send) -> None:
    body = json.dumps(
        {
            "error": "unauthorized",
            "error_description": (
                "this evopolicy server needs 'Authorization: Bearer <token>'; the operator "
                "printed the token when the server started (or set it with --token / "
                "EVOPOLICY_TOKEN)"
            ),
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="evopolicy"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def serve_http(
    mcp: Any,
    host: str,
    port: int,
    token: str | Sequence[str] | Tokens | None,
    *,
    fd: int | None = None,
    stop: threading.Event | None = None,
) -> bool:
    """Serve ``mcp`` (an MCPServer) over streamable HTTP at ``http://host:port/mcp`` until
    interrupted, or until ``stop`` is set; on the listening socket ``fd`` instead, where
    one is given. False when the server could not start (say, the port is taken)."""
    import uvicorn

    app = mcp.streamable_http_app(host=host)
    asgi = BearerTokenGate(app, token) if token or isinstance(token, Tokens) else app
    # log_config=None keeps uvicorn on our stderr logging (its default sends access logs to stdout).
    config = uvicorn.Config(asgi, host=host, port=port, fd=fd, log_config=None, access_log=False)
    server = uvicorn.Server(config)
    if stop is not None:

        def watch() -> None:
            stop.wait()
            server.should_exit = True

        threading.Thread(target=watch, name="evopolicy-http-stop", daemon=True).start()
    server.run()
    return bool(server.started)
