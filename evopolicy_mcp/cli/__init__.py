"""The ``evopolicy-mcp`` command: operator commands, the demo and the benchmarks.

Owns the entry point and argument parsing (``main``), ``serve`` (``serve``),
``agent run`` / ``agent check`` (``agent``), ``runs`` and ``report``
(``operator``), the demo (``demo``), the benchmarks (``bench``, ``bench_mcp``) and
options several commands share (``options``).

May import: every layer. Commands import what they need when they run, so
``evopolicy-mcp --help`` loads neither the MCP SDK nor a simulator.
"""

from evopolicy_mcp.cli.main import main

__all__ = ["main"]
