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

from .base import AgentTask, Invocation, Unsupported

__all__ = ["PROVIDER", "Kimi"]


class Kimi:
    name = "kimi"
    executable = "kimi"
    env_allow: tuple[str, ...] = ("KIMI_*", "MOONSHOT_*")

    def invocation(self, task: AgentTask, env: Mapping[str, str]) -> Invocation:
        if task.effort:
            raise Unsupported("Kimi Code has no effort option; leave out --effort")
        home = task.state_dir / "kimi-home"
        operator_home = Path(env.get("KIMI_CODE_HOME") or Path(env.get("HOME", "/")) / ".kimi-code")
        argv = [self.executable, "--output-format", "stream-json"]
        if task.model:
            argv += ["--model", task.model]
        argv += ["--prompt", task.prompt]
        config = home / "mcp.json"
        return Invocation(
            tuple(argv),
            {config: render("kimi", task.server)},
            env={"KIMI_CODE_HOME": str(home)},
            overlays={home: operator_home},
        )

    def preflight(self, env: Mapping[str, str]) -> str | None:
        return None


PROVIDER = Kimi()
