"""The scripted agent: an LLM-free MCP client (:mod:`.scripted_agent`) launched like a CLI.

It reads the same ``.mcp.json`` Claude Code does and goes through the same
launcher, so the whole loop (workspace, config, environment, stop, records,
judging) runs in tests and demos without any model.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from evopolicy_mcp.agents.config import render

from .base import AgentTask, Invocation, Unsupported

__all__ = ["PROVIDER", "Scripted"]


class Scripted:
    name = "scripted"
    executable = sys.executable
    package = "this package"
    env_allow: tuple[str, ...] = ()

    def invocation(self, task: AgentTask, env: Mapping[str, str]) -> Invocation:
        if task.model or task.effort:
            raise Unsupported("the scripted agent uses no model; leave out --model and --effort")
        config = task.workspace / ".mcp.json"
        argv = (
            self.executable,
            "-m",
            "evopolicy_mcp.agents.scripted_agent",
            "--mcp-config",
            str(config),
            "--task",
            task.task_id,
            "--",
            task.prompt,
        )
        return Invocation(argv, {config: render("claude", task.server)})

    def config_paths(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        return ()

    def preflight(self, env: Mapping[str, str]) -> str | None:
        return None


PROVIDER = Scripted()
