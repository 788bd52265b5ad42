"""Between the async MCP layer and the synchronous host: threads, faults, progress.

Invariants enforced here:

- No exception text except ``HostError.message`` reaches the agent. Anything
  else is logged to stderr and reported as a host fault; the report says
  "nothing was charged" only when that is known to be true.
- A failure to send progress never disturbs an evaluation, and the host's
  evaluation thread never blocks on the event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError

from evopolicy_mcp.host.authority import Host, HostError
from evopolicy_mcp.host.views import SubmissionView

__all__ = [
    "HostSlot",
    "client_of",
    "token_client",
    "Progress",
    "admit",
    "all_pages",
    "host_call",
    "resource_call",
]

log = logging.getLogger("evopolicy_mcp.server.app")
T = TypeVar("T")


def client_of(ctx: Context) -> str | None:
    """Who is calling, for binding runs to the client that started them: over HTTP its
    bearer token (one per client when the operator gives several), else its MCP session
    (clients of the older, stateful protocol); nobody in particular over stdio (one
    client per server process) or an HTTP client with neither. Kept as a digest."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", None)
    if headers is None:
        return None
    for header, kind in (("authorization", "token"), ("mcp-session-id", "session")):
        value = headers.get(header)
        if value:
            return _named(kind, value)
    return None


def token_client(token: str) -> str:
    """The client :func:`client_of` names for requests with bearer token ``token``."""
    return _named("token", f"Bearer {token}")


def _named(kind: str, value: str) -> str:
    return f"{kind}:" + hashlib.sha256(value.strip().encode()).hexdigest()[:32]


class HostSlot:
    """Holds the host for the connections of one server.

    Given a Host, the caller owns it. Given a factory, the first connection
    creates the host and the last one to leave closes it; stdio creates it only
    once the transport has moved fd 1 off the wire, so policy processes cannot
    inherit the protocol stream.
    """

    def __init__(self, source: Host | Callable[[], Host]) -> None:
        self._host: Host | None = None
        self._factory: Callable[[], Host] | None = None
        if isinstance(source, Host):
            self._host = source
        else:
            self._factory = source
        self._users = 0

    @asynccontextmanager
    async def lifespan(self, _server: object) -> AsyncIterator[dict[str, Any]]:
        if self._host is None and self._factory is not None:
            self._host = self._factory()
        self._users += 1
        try:
            yield {}
        finally:
            self._users -= 1
            if self._factory is not None and self._users == 0 and self._host is not None:
                host, self._host = self._host, None
                await anyio.to_thread.run_sync(host.close)

    @property
    def host(self) -> Host:
        if self._host is None:
            raise RuntimeError("the host is not open: the server is not connected")
        return self._host


async def host_call(
    what: str, fn: Callable[[], T], *, fault: str = "nothing was charged", abandon: bool = False
) -> T:
    """Run a blocking host call in a worker thread and translate its failures."""
    try:
        return await anyio.to_thread.run_sync(fn, abandon_on_cancel=abandon)
    except HostError as exc:
        raise ToolError(exc.message) from None
    except Exception:
        log.exception("host fault in %s", what)
        raise ToolError(
            f"host fault in {what} (not caused by your program): {fault}. The fault is logged "
            "on the server; try again, and tell the operator if it persists."
        ) from None


class Progress:
    """Carries per-episode progress from the host's evaluation thread to the client.

    The host calls :meth:`from_thread` from its own thread; the call never
    blocks it. At most one notification goes out per ``interval`` seconds,
    carrying the latest count, so fast episodes do not flood the client.
    """

    def __init__(self, ctx: Context, interval: float = 0.05) -> None:
        self._ctx = ctx
        self._interval = interval
        self._loop = asyncio.get_running_loop()
        self._send, self._receive = anyio.create_memory_object_stream[tuple[int, int]](math.inf)
        self.last: tuple[int, int] | None = None

    def from_thread(self, done: int, total: int) -> None:
        with suppress(RuntimeError):  # a closed loop: nobody is listening any more
            self._loop.call_soon_threadsafe(self._post, done, total)

    def _post(self, done: int, total: int) -> None:
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._send.send_nowait((done, total))

    async def report(self, done: int, total: int, note: str = "") -> None:
        if self.last == (done, total):
            return
        self.last = (done, total)
        message = f"{done}/{total} episodes evaluated" + (f"; {note}" if note else "")
        try:
            await self._ctx.report_progress(done, total, message)
        except Exception:  # a client that went away must not fail the call
            log.debug("progress notification not sent", exc_info=True)

    @asynccontextmanager
    async def pumping(self) -> AsyncIterator[Progress]:
        """Send progress while the block runs; nothing is sent after it ends.

        The block must not raise (a task group would wrap the exception)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._pump)
            try:
                yield self
            finally:
                self._send.close()
                tg.cancel_scope.cancel()

    async def _pump(self) -> None:
        async with self._receive:
            async for item in self._receive:
                while True:
                    try:
                        item = self._receive.receive_nowait()
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                await self.report(*item)
                await anyio.sleep(self._interval)


async def admit(
    host: Host,
    run_id: str,
    episodes: str,
    files: dict[str, str] | None,
    program_dir: str | None,
    progress: Progress,
    client: str | None = None,
) -> str:
    """Admission in a worker thread. On a host fault, "nothing was charged" is claimed
    only after checking that the run's charges did not move."""

    def charges() -> tuple[int, int] | None:
        try:
            status = host.run_status(run_id, client=client)
        except Exception:
            return None
        return status.episodes_used, status.submissions_used

    def attempt() -> str:
        before = charges()
        try:
            return host.submit(
                run_id,
                episodes,
                files=files,
                program_dir=program_dir,
                on_progress=progress.from_thread,
                client=client,
            )
        except HostError:
            raise
        except Exception as exc:
            after = charges()
            raise _AdmissionFault(before is not None and before == after) from exc

    try:
        return await anyio.to_thread.run_sync(attempt)
    except HostError as exc:
        raise ToolError(exc.message) from None
    except _AdmissionFault as fault:
        log.error("host fault in submit_policy admission", exc_info=fault.__cause__)
        outcome = (
            "nothing was charged"
            if fault.uncharged
            else "call run_status to see whether a submission was recorded"
        )
        raise ToolError(
            f"host fault in submit_policy admission (not caused by your program): {outcome}. "
            "The fault is logged on the server; try again, and tell the operator if it persists."
        ) from None


class _AdmissionFault(Exception):
    def __init__(self, uncharged: bool) -> None:
        super().__init__("admission fault")
        self.uncharged = uncharged


# Refusals that mean "no such thing": a not-found error to a resource reader.
_NOT_FOUND = {
    "unknown_task",
    "unknown_run",
    "unknown_submission",
    "bad_episode",
    "unknown_artifact",
}


async def resource_call(fn: Callable[[], T]) -> T:
    try:
        return await anyio.to_thread.run_sync(fn)
    except HostError as exc:
        if exc.code in _NOT_FOUND:
            raise ResourceNotFoundError(exc.message) from None
        raise ResourceError(exc.message) from None
    except Exception:
        log.exception("host fault while reading a resource")
        raise ResourceError(
            "host fault while reading this resource; it is logged on the server"
        ) from None


def all_pages(
    host: Host, run_id: str, submission_id: str, client: str | None = None
) -> SubmissionView:
    view = host.feedback(run_id, submission_id, offset=0, limit=200, client=client)
    summaries, traces = list(view.episode_summaries), list(view.traces)
    while view.next_offset is not None:
        view = host.feedback(
            run_id, submission_id, offset=view.next_offset, limit=200, client=client
        )
        summaries += view.episode_summaries
        traces += view.traces
    return view.model_copy(
        update={"episode_summaries": summaries, "traces": traces, "next_offset": None, "hint": None}
    )
