"""How results and errors leave the server.

- A tool result is the view's compact document (:func:`~evopolicy_mcp.host.pages.compact`)
  twice over: as structured content, and as its compact JSON text for clients
  that read only text. Clients differ in which one they hand the model, so
  both carry the same data at the same size.
- Arguments that fail a tool's schema get one sentence naming each argument
  and what it allows (:func:`~evopolicy_mcp.server.schemas.argument_error`).
- A file read through a resource template carries the media type of its name
  (``replay.gif`` is ``image/gif``), not one type for the whole template.
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Iterable
from typing import Any

from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult, TextContent
from pydantic import BaseModel, ValidationError

from evopolicy_mcp.host.pages import compact, compact_text
from evopolicy_mcp.server.schemas import argument_error

__all__ = ["FILE_MIME", "EvopolicyServer", "agent_result", "file_mime"]

FILE_MIME = "application/octet-stream"  # what the file template declares: any file
_KNOWN = {
    ".gz": "application/gzip",
    ".jsonl": "application/jsonl",
    ".json": "application/json",
    ".gif": "image/gif",
    ".png": "image/png",
    ".txt": "text/plain",
    ".csv": "text/csv",
    ".npy": "application/octet-stream",
}
_FILE_URI = re.compile(r"^evopolicy://runs/[^/]+/submissions/[^/]+/episodes/[^/]+/files/(.+)$")


def file_mime(name: str) -> str:
    """The media type of an episode file, from its name (``trajectory.jsonl.gz``: gzip)."""
    lowered = name.lower()
    for suffix, kind in _KNOWN.items():
        if lowered.endswith(suffix):
            return kind
    return mimetypes.guess_type(name)[0] or FILE_MIME


def agent_result(view: BaseModel) -> CallToolResult:
    """A tool result carrying ``view`` compactly, as structured content and as text."""
    return CallToolResult(
        content=[TextContent(type="text", text=compact_text(view))],
        structured_content=compact(view),
    )


class EvopolicyServer(MCPServer):
    """The SDK's server with this project's one-line argument errors and file types."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            # The SDK raises a rejected argument as a ToolError caused by the ValidationError.
            cause = exc.__cause__
            tool = self._tool_manager.get_tool(name)
            if (
                isinstance(exc, UnexpectedToolError)
                or not isinstance(cause, ValidationError)
                or tool is None
            ):
                raise
            message = argument_error(cause, tool.parameters)
            raise ToolError(f"Error executing tool {name}: {message}") from cause

    async def read_resource(
        self, uri: Any, context: Context[Any, Any] | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        contents = await super().read_resource(uri, context)
        match = _FILE_URI.match(str(uri))
        if match is None or isinstance(contents, InputRequiredResult):
            return contents
        kind = file_mime(match.group(1))
        return [
            ReadResourceContents(content=c.content, mime_type=kind, meta=c.meta) for c in contents
        ]
