"""Claude Code: ``claude --print --output-format stream-json`` with a strict MCP config."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from evopolicy_mcp.agents.config import render

from .base import AgentTask, Invocation, home

__all__ = ["PROVIDER", "Claude"]


class Claude:
    name = "claude"
    executable = "claude"
    package = "npm install -g @anthropic-ai/claude-code"
    env_allow: tuple[str, ...] = ("ANTHROPIC_*", "CLAUDE_*", "IS_SANDBOX")
    # Qoder takes the same command line with these three spelt its way.
    verbose: tuple[str, ...] = ("--verbose",)
    permission = "bypassPermissions"
    effort_flag = "--effort"

    def invocation(self, task: AgentTask, env: Mapping[str, str]) -> Invocation:
        config = task.workspace / ".mcp.json"
        argv = [
            self.executable,
            "--print",
            "--output-format",
            "stream-json",
            *self.verbose,
            "--permission-mode",
            self.permission,
            "--no-session-persistence",
            "--strict-mcp-config",
            "--mcp-config",
            str(config),
        ]
        if task.model:
            argv += ["--model", task.model]
        if task.effort:
            argv += [self.effort_flag, task.effort]
        # --mcp-config takes several files: "--" keeps the prompt from being read as one.
        argv += ["--", task.prompt]
        return Invocation(tuple(argv), {config: render(self.name, task.server)})

    def config_paths(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        if env.get("CLAUDE_CONFIG_DIR"):
            return (Path(env["CLAUDE_CONFIG_DIR"]),)
        return (home(env) / ".claude", home(env) / ".claude.json")

    def preflight(self, env: Mapping[str, str]) -> str | None:
        if os.geteuid() == 0 and env.get("IS_SANDBOX") != "1":
            return (
                "Claude Code refuses --permission-mode bypassPermissions as root; run as an "
                "unprivileged user, or set IS_SANDBOX=1 if this machine is a disposable sandbox"
            )
        return None


PROVIDER = Claude()
