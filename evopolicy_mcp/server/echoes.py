"""Bounded echoes: nothing the server says back repeats more than ~200 characters of
what a client sent.

An agent that sends a 200,000-character run id must not get 200,000 characters
back in the error (its context is its budget too). Rather than every message
cutting its own arguments, this is one mechanism at the edge:

- :class:`BoundedEchoes`, a server middleware, sees each request's parameters
  and every error on its way back (an ``isError`` tool result, a JSON-RPC
  error, any other exception): where the message repeats a long string of
  the request (as sent, as its ``repr`` or JSON-escaped, whole or a prefix of
  it), the repetition is cut to :data:`ECHO` characters and says how long it was;
  no error message is longer than :data:`MESSAGE_CAP` in any case.
- :class:`BoundedLines`, the log formatter of ``serve``, cuts every log line
  (tracebacks included) to :data:`LINE_CAP` characters: a log cannot know
  what the client sent, so it bounds everything.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp.types import ErrorData
from pydantic import ValidationError

__all__ = ["ECHO", "LINE_CAP", "MESSAGE_CAP", "BoundedEchoes", "BoundedLines", "bound"]

ECHO = 200  # the most of one sent string an error repeats
MESSAGE_CAP = 2000  # the longest error message, whatever it holds
LINE_CAP = 300  # the longest server log line


def _strings(value: Any) -> Iterator[str]:
    """Every string in a request's parameters, dictionary keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _cut(text: str, form: str) -> str:
    """``text`` with every run of more than ECHO characters of ``form`` (from its
    start) cut to ECHO characters and a note of what was left out."""
    head = form[: ECHO + 1]
    out, at = [], 0
    while (found := text.find(head, at)) >= 0:
        end = found + len(head)
        while end < len(text) and end - found < len(form) and text[end] == form[end - found]:
            end += 1
        out.append(text[at : found + ECHO])
        out.append(f"... [{end - found - ECHO} more characters you sent]")
        at = end
    out.append(text[at:])
    return "".join(out)


def bound(text: str, sent: Iterable[str]) -> str:
    """``text`` with its echoes of ``sent`` cut, and at most MESSAGE_CAP characters."""
    for s in sorted({s for s in sent if len(s) > ECHO}, key=len, reverse=True):
        for form in dict.fromkeys((s, repr(s)[1:-1], json.dumps(s)[1:-1])):
            if len(form) > ECHO and form[: ECHO + 1] in text:
                text = _cut(text, form)
    if len(text) > MESSAGE_CAP:
        text = text[:MESSAGE_CAP] + f"... [{len(text) - MESSAGE_CAP} more characters]"
    return text


def _bound_all(value: Any, sent: list[str]) -> Any:
    """Every string in ``value`` (an error's data: a string, or JSON made of them) bounded."""
    if isinstance(value, str):
        return bound(value, sent)
    if isinstance(value, Mapping):
        return {k: _bound_all(v, sent) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_bound_all(v, sent) for v in value]
    return value


def _error(exc: Exception, sent: list[str]) -> MCPError:
    if isinstance(exc, MCPError):
        error = exc.error
        message, data = bound(error.message, sent), _bound_all(error.data, sent)
        return MCPError.from_error_data(ErrorData(code=error.code, message=message, data=data))
    # What the dispatcher would send for any other exception (code 0), bounded.
    return MCPError(code=0, message=bound(str(exc), sent))


class BoundedEchoes:
    """Server middleware: every error answering a request is bounded (:func:`bound`)."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        try:
            result = await call_next(ctx)
        except ValidationError:
            raise  # goes out as "Invalid request parameters", with none of the input
        except Exception as exc:
            sent = list(_strings(ctx.params)) + [ctx.method]
            raise _error(exc, sent) from None
        if isinstance(result, dict) and result.get("isError"):
            sent = list(_strings(ctx.params))
            content = [
                {**item, "text": bound(item["text"], sent)}
                if isinstance(item, dict) and isinstance(item.get("text"), str)
                else item
                for item in result.get("content") or []
            ]
            result = {**result, "content": content}
        return result


class BoundedLines(logging.Formatter):
    """A formatter whose every output line is at most LINE_CAP characters."""

    def format(self, record: logging.LogRecord) -> str:
        lines = super().format(record).split("\n")
        return "\n".join(
            line if len(line) <= LINE_CAP else f"{line[:LINE_CAP]}... [{len(line) - LINE_CAP} more]"
            for line in lines
        )
