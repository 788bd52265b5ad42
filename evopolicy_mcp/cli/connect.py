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


def add_connect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "url", help="the server's streamable HTTP endpoint, e.g. http://127.0.0.1:N/mcp"
    )


async def _pump(source: Any, sink: Any) -> None:
    async with source:
        async for item in source:
            if isinstance(item, Exception):  # a message that did not parse: the sender's
                log.warning("dropped a message that did not parse: %s", type(item).__name__)
                continue
            await sink.send(item)


async def forward(remote: Remote) -> None:
    """Pass messages both ways until stdin closes or the server goes away."""
    from mcp.server.stdio import stdio_server

    from evopolicy_mcp.agents.client import http_transport

    async with (
        http_transport(remote) as (remote_in, remote_out),
        stdio_server() as (local_in, local_out),
        anyio.create_task_group() as tg,
    ):

        async def upstream() -> None:
            await _pump(local_in, remote_out)
            tg.cancel_scope.cancel()  # the client closed stdin: done

        tg.start_soon(upstream)
        tg.start_soon(_pump, remote_in, local_out)


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
