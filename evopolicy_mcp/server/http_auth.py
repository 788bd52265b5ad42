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
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

__all__ = ["BearerTokenGate", "is_loopback", "new_token", "resolve_token", "serve_http"]

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


class BearerTokenGate:
    """Wrap an ASGI app so each HTTP request needs a bearer token: the one given, or one
    of several (one per client: each client's runs are its own)."""

    def __init__(self, app: ASGIApp, token: str | Sequence[str]) -> None:
        tokens = [token] if isinstance(token, str) else list(token)
        if not tokens or not all(tokens):
            raise ValueError("an empty bearer token would let every request through")
        self.app = app
        self._expected = [f"Bearer {t}".encode() for t in tokens]

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
        return sum(secrets.compare_digest(given, t) for t in self._expected) == 1


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
    mcp: Any, host: str, port: int, token: str | Sequence[str] | None, *, fd: int | None = None
) -> bool:
    """Serve ``mcp`` (an MCPServer) over streamable HTTP at ``http://host:port/mcp`` until
    interrupted; on the listening socket ``fd`` instead, where one is given. False when
    the server could not start (say, the port is taken)."""
    import uvicorn

    app = mcp.streamable_http_app(host=host)
    asgi = BearerTokenGate(app, token) if token else app
    # log_config=None keeps uvicorn on our stderr logging (its default sends access logs to stdout).
    config = uvicorn.Config(asgi, host=host, port=port, fd=fd, log_config=None, access_log=False)
    server = uvicorn.Server(config)
    server.run()
    return bool(server.started)
