"""The MCP client side of a configured server: its transport, stdio or streamable HTTP.

Shared by the MCP clients of this package (``agent check``, the scripted agent,
the ``connect`` proxy). Imports the MCP SDK, and nothing of the host.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, TextIO

import httpx2
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from evopolicy_mcp.agents.config import Launch, Remote

__all__ = ["CONNECT_SECONDS", "READ_SECONDS", "finalize_over", "http_transport", "transport"]

CONNECT_SECONDS = 30.0
READ_SECONDS = 900.0  # a tool call waits at most 50 s; progress keeps a stream alive


@contextlib.asynccontextmanager
async def http_transport(remote: Remote) -> AsyncIterator[Any]:
    """Streamable HTTP to ``remote`` with its bearer token on every request."""
    timeout = httpx2.Timeout(CONNECT_SECONDS, read=READ_SECONDS)
    async with (
        httpx2.AsyncClient(headers=remote.headers, timeout=timeout) as http,
        streamable_http_client(remote.url, http_client=http) as streams,
    ):
        yield streams


def transport(
    server: Launch | Remote, env: dict[str, str] | None = None, errlog: TextIO | None = None
) -> Any:
    """The transport to hand to ``mcp.Client``: start ``server`` (stdio, in ``env``
    plus its own variables) or reach it over HTTP."""
    if isinstance(server, Remote):
        return http_transport(server)
    params = StdioServerParameters(
        command=server.command, args=list(server.args), env={**(env or {}), **server.env}
    )
    return stdio_client(params, errlog=errlog) if errlog is not None else stdio_client(params)


def finalize_over(remote: Remote, run_id: str, candidates: list[str]) -> str | None:
    """Finalize a run through its server, as its agent would (so that server judges it);
    None when it took the candidates, else why not."""
    import anyio
    from mcp import Client

    async def call() -> str | None:
        async with Client(transport(remote)) as client:
            args = {"run_id": run_id, "candidates": candidates}
            result = await client.call_tool("finalize", args)
        if not result.is_error:
            return None
        text = getattr(result.content[0], "text", "") if result.content else ""
        return str(text)[:300] or "finalize was refused"

    try:
        return anyio.run(call)
    except Exception as exc:  # the server is gone or does not answer
        return f"the server did not answer: {type(exc).__name__}"
