"""Codex: ``codex exec --json``, the server given as ``-c mcp_servers...`` overrides.

Codex reads MCP servers from ``$CODEX_HOME/config.toml``, or from a project's
``.codex/config.toml`` only once that project is trusted. Overrides on the
command line need neither and change no file. ``--ignore-user-config`` keeps
the operator's other MCP servers (and settings) out, as Claude Code's
``--strict-mcp-config`` does; the login still comes from ``$CODEX_HOME``.
The command line, with the overrides, is in the run's ``agent_started`` event.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from evopolicy_mcp.agents.config import (
    STARTUP_TIMEOUT_SECONDS,
    TOKEN_VARIABLE,
    TOOL_TIMEOUT_SECONDS,
    Launch,
    Remote,
)

from .base import SERVER_NAME, AgentTask, Invocation, home

__all__ = ["PROVIDER", "Codex", "overrides"]


def overrides(server: Launch | Remote) -> list[str]:
    """``-c key=value`` pairs (values in TOML) that define the server for one invocation.
    A remote server's token is read from :data:`TOKEN_VARIABLE`, never the command line."""
    key = f"mcp_servers.{SERVER_NAME}"
    if isinstance(server, Remote):
        pairs = [
            f"{key}.url={json.dumps(server.url)}",
            f"{key}.bearer_token_env_var={json.dumps(TOKEN_VARIABLE)}",
        ]
    else:
        pairs = [
            f"{key}.command={json.dumps(server.command)}",
            f"{key}.args=[{', '.join(json.dumps(a) for a in server.args)}]",
        ]
    pairs += [
        f"{key}.startup_timeout_sec={STARTUP_TIMEOUT_SECONDS}",
        f"{key}.tool_timeout_sec={TOOL_TIMEOUT_SECONDS}",
    ]
    if isinstance(server, Launch):
        pairs += [f"{key}.env.{name}={json.dumps(value)}" for name, value in server.env.items()]
    return [arg for pair in pairs for arg in ("-c", pair)]


class Codex:
    name = "codex"
    executable = "codex"
    package = "npm install -g @openai/codex"
    env_allow: tuple[str, ...] = ("OPENAI_*", "CODEX_*")

    def invocation(self, task: AgentTask, env: Mapping[str, str]) -> Invocation:
        argv = [
            self.executable,
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--ephemeral",
            "--ignore-user-config",
            "--sandbox",
            "workspace-write",
            "--cd",
            str(task.workspace),
            "-c",
            'approval_policy="never"',
            *overrides(task.server),
        ]
        if task.model:
            argv += ["--model", task.model]
        if task.effort:
            argv += ["-c", f"model_reasoning_effort={json.dumps(task.effort)}"]
        argv += ["--", task.prompt]
        remote = task.server if isinstance(task.server, Remote) else None
        return Invocation(tuple(argv), env={TOKEN_VARIABLE: remote.token} if remote else {})

    def config_paths(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        return (Path(env.get("CODEX_HOME") or home(env) / ".codex"),)

    def preflight(self, env: Mapping[str, str]) -> str | None:
        return None


PROVIDER = Codex()
