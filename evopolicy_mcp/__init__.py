"""evopolicy-mcp: evolve executable policies through MCP, scored on hidden episodes."""

__version__ = "0.1.0"
