"""``evopolicy-mcp connect URL``: a stdio MCP server that forwards to a running one.

For a client that only starts stdio servers: it starts this proxy, which
passes every message between its stdin/stdout and the streamable HTTP
endpoint ``URL`` unchanged (requests, results, progress notifications). It
holds nothing but the URL and the bearer token (``$EVOPOLICY_TOKEN``): no path
to the records and no way to another run than the one that URL serves. It
exits when its stdin closes, or with a one-line error when the server cannot
be reached.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

import anyio

from evopolicy_mcp.agents.config import TOKEN_VARIABLE, Remote

__all__ = ["add_connect_arguments", "cmd_connect", "forward"]

log = logging.getLogger(__name__)
REPLY_GRACE = 60.0  # after stdin closes, how long replies still on their way are awaited


def add_connect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "url", help="the server's streamable HTTP endpoint, e.g. http://127.0.0.1:N/mcp"
    )


class _Relay:
    """Both directions of the proxy; knows which requests still await their reply."""

    def __init__(self) -> None:
        self.pending: set[object] = set()
        self.settled = anyio.Event()

    async def up(self, source: Any, sink: Any) -> None:
        """Client to server, until stdin closes."""
        async with source:
            async for item in source:
                if isinstance(item, Exception):  # a line that did not parse: the client's
                    log.warning("dropped a message that did not parse: %s", type(item).__name__)
                    continue
                if isinstance(getattr(item.message, "id", None), int | str) and hasattr(
                    item.message, "method"
                ):
                    self.pending.add(item.message.id)
                await sink.send(item)

    async def down(self, source: Any, sink: Any) -> None:
        """Server to client: replies, notifications, progress."""
        async with source, sink:
            async for item in source:
                if isinstance(item, Exception):
                    raise item
                self.pending.discard(getattr(item.message, "id", None))
                await sink.send(item)
                if not self.pending:
                    self.settled.set()


async def forward(remote: Remote) -> None:
    """Pass messages both ways until stdin closes (and the replies it awaits arrived,
    within :data:`REPLY_GRACE` seconds) or the server goes away."""
    from mcp.server.stdio import stdio_server

    from evopolicy_mcp.agents.client import http_transport

    relay = _Relay()
    async with (
        http_transport(remote) as (remote_in, remote_out),
        stdio_server() as (local_in, local_out),
        anyio.create_task_group() as tg,
    ):

        async def upstream() -> None:
            await relay.up(local_in, remote_out)
            if relay.pending:
                relay.settled = anyio.Event()
                with anyio.move_on_after(REPLY_GRACE):
                    await relay.settled.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(upstream)
        tg.start_soon(relay.down, remote_in, local_out)


def cmd_connect(args: argparse.Namespace) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    try:
        anyio.run(forward, Remote(args.url, os.environ.get(TOKEN_VARIABLE, "")))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]  # type: ignore[assignment]
        print(f"evopolicy-mcp connect: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)
        return 1
    return 0
