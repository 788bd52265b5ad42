"""The stdio transport with bounded requests.

The SDK's stdio transport reads a whole line, however long, before it parses
it (a 200 MiB request took 806 MiB of the server's memory), and drops a line
it cannot parse without a word (a request nested too deep for the JSON parser
was never answered). Here requests are read at most ``max_bytes`` at a time:
a longer line is skipped to its end without being kept, and a line that
cannot be read is answered with a JSON-RPC error carrying the request's id
when it can be found, so the client is told rather than left waiting. The
rest (the claim of fd 1, the writer) is the SDK's.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncIterator

import anyio
import anyio.to_thread
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

__all__ = ["MAX_REQUEST_BYTES", "run_stdio"]

MAX_REQUEST_BYTES = 32 << 20  # inline programs are at most 8 MiB, JSON escapes included ~4x
_CHUNK = 1 << 16
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')
_INVALID_REQUEST, _PARSE_ERROR = -32600, -32700


class _NoInput:
    """What the SDK's stdin reader gets: nothing (the requests come through here)."""

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        raise StopAsyncIteration


def _claim_stdin() -> int:
    """A private copy of fd 0 for the wire; fd 0 itself then reads /dev/null, so that
    nothing else in the process or its children reads requests."""
    private = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    os.set_inheritable(private, False)
    return private


def _request_id(head: bytes) -> types.RequestId | None:
    match = _ID.search(head[:4096])
    if match is None:
        return None
    text = match[1].decode("utf-8", "replace")
    if text.startswith('"'):
        return text[1:-1]
    return int(text)


async def _answer(
    write: MemoryObjectSendStream[SessionMessage], head: bytes, code: int, message: str
) -> None:
    error = types.JSONRPCError(
        jsonrpc="2.0",
        id=_request_id(head),
        error=types.ErrorData(code=code, message=message),
    )
    await write.send(SessionMessage(error))


def _unreadable(exc: Exception) -> str:
    text = str(exc)
    if "recursion" in text.lower():
        return (
            "the request nests deeper than this server reads; send arguments with fewer "
            "levels of nesting"
        )
    first = text.strip().splitlines()[-1] if text.strip() else type(exc).__name__
    return f"the request is not a JSON-RPC message this server can read: {first[:200]}"


async def _pump(
    fd: int,
    read: MemoryObjectSendStream[SessionMessage | Exception],
    write: MemoryObjectSendStream[SessionMessage],
    max_bytes: int,
) -> None:
    line = bytearray()
    skipping = b""  # the head of a line too long to keep, while its rest is skipped
    async with read:
        while True:
            chunk = await anyio.to_thread.run_sync(os.read, fd, _CHUNK, abandon_on_cancel=True)
            if not chunk:
                return
            while chunk:
                end = chunk.find(b"\n")
                part, chunk = (chunk, b"") if end < 0 else (chunk[:end], chunk[end + 1 :])
                if skipping:
                    if end >= 0:
                        await _answer(
                            write,
                            skipping,
                            _INVALID_REQUEST,
                            f"request refused: longer than {max_bytes >> 20} MiB; send less "
                            "(a program may hold at most 8 MiB)",
                        )
                        skipping = b""
                    continue
                line += part
                if len(line) > max_bytes:
                    skipping, line = bytes(line[:4096]) or b" ", bytearray()
                    if end >= 0:  # the line ended in this very chunk
                        chunk = b"\n" + chunk
                    continue
                if end < 0:
                    continue
                data, line = bytes(line), bytearray()
                if not data.strip():
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(data, by_name=False)
                except Exception as exc:
                    await _answer(write, data, _PARSE_ERROR, _unreadable(exc))
                    continue
                await read.send(SessionMessage(message))


async def run_stdio(mcp: MCPServer, max_bytes: int = MAX_REQUEST_BYTES) -> None:
    """Serve ``mcp`` over stdin and stdout until stdin closes."""
    fd = _claim_stdin()
    try:
        async with stdio_server(stdin=_NoInput()) as (_unused, write):  # type: ignore[arg-type]
            read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](
                0
            )
            async with anyio.create_task_group() as tg:
                tg.start_soon(_pump, fd, read_send, write, max_bytes)
                server = mcp._lowlevel_server  # what MCPServer.run_stdio_async runs
                await server.run(read_receive, write, server.create_initialization_options())
                tg.cancel_scope.cancel()
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
