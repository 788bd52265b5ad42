"""The MCP surface: tools, resources and the prompt over stdio or streamable HTTP.

Owns the server (``app.build_server``), the bridge between the async MCP layer
and the synchronous host (``bridge``) and the bearer-token gate of HTTP
(``http_auth``). It translates and reports progress; no rules live here.

May import: the host and everything below it, and the MCP SDK.
"""

from evopolicy_mcp.server.app import build_server

__all__ = ["build_server"]
