"""Kimi Code: ``kimi --prompt ... --output-format stream-json`` (prompt mode).

Prompt mode refuses ``--auto``, ``--yolo`` and ``--plan``: it runs unattended
by itself.

Kimi has no option naming an MCP config file, and it reads a project's
``.kimi-code/mcp.json`` only in a folder the user trusted. It always reads
``$KIMI_CODE_HOME/mcp.json``, so the session gets its own Kimi home: our
``mcp.json`` plus a link to every other entry of the operator's Kimi home
(config, login), which therefore keep working. The operator's ``mcp.json`` is
neither read nor changed; what Kimi writes through a link (logs, sessions in
an existing directory) lands in the operator's home.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from evopolicy_mcp.agents.config import render

from .base import AgentTask, Invocation, Unsupported, home

__all__ = ["PROVIDER", "Kimi"]


class Kimi:
    name = "kimi"
    executable = "kimi"
    package = "npm install -g @moonshot-ai/kimi-code (Node.js >= 22.19)"
    env_allow: tuple[str, ...] = ("KIMI_*", "MOONSHOT_*")

    def invocation(self, task: AgentTask, env: Mapping[str, str]) -> Invocation:
        if task.effort:
            raise Unsupported("Kimi Code has no effort option; leave out --effort")
        session_home = task.state_dir / "kimi-home"
        argv = [self.executable, "--output-format", "stream-json"]
        if task.model:
            argv += ["--model", task.model]
        argv += ["--prompt", task.prompt]
        config = session_home / "mcp.json"
        return Invocation(
            tuple(argv),
            {config: render("kimi", task.server)},
            env={"KIMI_CODE_HOME": str(session_home)},
            overlays={session_home: self.config_paths(env)[0]},
        )

    def config_paths(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        """The operator's Kimi home, which the session home links into."""
        return (Path(env.get("KIMI_CODE_HOME") or home(env) / ".kimi-code"),)

    def preflight(self, env: Mapping[str, str]) -> str | None:
        return None


PROVIDER = Kimi()
