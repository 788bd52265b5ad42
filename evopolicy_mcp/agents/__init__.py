"""Agent integrations: run an agent CLI headless against one run of a task.

Owns the common launch path (``launch``: workspace, config, process group, stop,
records), the health check (``check``), one provider module per CLI (``claude``,
``codex``, ``kimi``, ``qoder``, ``scripted``) turning the common
:class:`~.base.AgentTask` into that CLI's invocation, their MCP configs
(``config``), and the LLM-free scripted agent (``scripted_agent``, an MCP client
run as its own process, with ``policy_family``).

May import: the host and everything below it; the MCP SDK only in the MCP
clients (``check``, ``scripted_agent``). This ``__init__`` imports nothing: the
scripted agent runs as ``python -m`` and must not load the host.
"""

__all__: list[str] = []
