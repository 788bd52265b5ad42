"""MCP client configs for the agent CLIs: Claude Code, Codex, Kimi Code, Qoder.

One function, :func:`render`, writes every format, for a server the client
starts itself (:class:`Launch`, stdio) or one already running (:class:`Remote`,
streamable HTTP with a bearer token, as ``agent run`` starts it). The files
shipped in ``agent_configs/`` are its output for the plain ``evopolicy-mcp
serve`` command; ``evopolicy-mcp agent-config CLIENT`` prints it for this
machine's interpreter, so the config works without the console script on
``PATH``. A client that is given a :class:`Remote` but should not speak HTTP
itself starts :func:`proxy_launch`: ``evopolicy-mcp connect URL``, a stdio
proxy holding only the URL and the token.

Timeouts: an evaluation can outlast a client's default 60 s tool timeout.
``submit_policy`` and ``get_feedback`` return within ``wait_seconds`` (at most
50 s) plus a little, and the configs allow far more, so a slow machine does
not cut a call off; Codex also gets time to start the server.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "CLIENTS",
    "SHIPPED_FILES",
    "TOKEN_VARIABLE",
    "Launch",
    "Remote",
    "add_agent_config_arguments",
    "cmd_agent_config",
    "local_launch",
    "proxy_launch",
    "render",
    "shipped_launch",
]

SERVER_NAME = "evopolicy"
TOKEN_VARIABLE = "EVOPOLICY_TOKEN"  # the bearer token, where a client reads it from a variable
TOOL_TIMEOUT_SECONDS = 600
STARTUP_TIMEOUT_SECONDS = 30
SHIPPED_FILES = {
    "claude": "claude.mcp.json",
    "codex": "codex.config.toml",
    "kimi": "kimi.mcp.json",
    "qoder": "qoder.mcp.json",
}
CLIENTS = tuple(SHIPPED_FILES)
WHERE = {
    "claude": "save as .mcp.json in the project (or: claude mcp add -s project ...)",
    "codex": "append to ~/.codex/config.toml (or a trusted project's .codex/config.toml)",
    "kimi": "save as ~/.kimi-code/mcp.json (or a trusted project's .kimi-code/mcp.json)",
    "qoder": "save as .mcp.json in the project (or merge into ~/.qoder/settings.json)",
}


@dataclass(frozen=True)
class Launch:
    """How a client starts the server."""

    command: str
    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Remote:
    """A running server, reached over streamable HTTP with a bearer token."""

    url: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


def proxy_launch(remote: Remote) -> Launch:
    """The stdio proxy to ``remote`` (``evopolicy-mcp connect``), token in its environment."""
    return Launch(
        sys.executable,
        ("-m", "evopolicy_mcp", "connect", remote.url),
        {TOKEN_VARIABLE: remote.token},
    )


def shipped_launch() -> Launch:
    return Launch("evopolicy-mcp", ("serve",))


def local_launch(
    *,
    task: str | None = None,
    run: str | None = None,
    data_dir: Path | None = None,
    tasks_dirs: Sequence[Path] = (),
    isolation: str = "default",
    workers: int | None = None,
    program_root: Path | None = None,
) -> Launch:
    """This interpreter running the server, so no ``PATH`` lookup is involved."""
    args = ["-m", "evopolicy_mcp", "serve"]
    if data_dir is not None:
        args += ["--data-dir", str(data_dir.expanduser().resolve())]
    for d in tasks_dirs:
        args += ["--tasks-dir", str(Path(d).expanduser().resolve())]
    if task is not None:
        args += ["--task", task, "--run", run or f"{task}-run"]
    if isolation != "default":
        args += ["--isolation", isolation]
    if workers is not None:
        args += ["--workers", str(workers)]
    if program_root is not None:
        args += ["--program-root", str(program_root.expanduser().resolve())]
    return Launch(sys.executable, tuple(args))


def _toml_string(text: str) -> str:
    # JSON string escapes are valid TOML basic-string escapes.
    return json.dumps(text)


def render(client: str, server: Launch | Remote) -> str:
    """The config text ``client`` reads to start or reach the server. Kimi Code is
    given the stdio proxy to a remote server; the others reach it over HTTP."""
    if client not in SHIPPED_FILES:
        raise ValueError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")
    if isinstance(server, Remote):
        if client == "kimi":
            return render(client, proxy_launch(server))
        return _render_remote(client, server)
    launch = server
    if client == "codex":
        lines = [
            f"[mcp_servers.{SERVER_NAME}]",
            f"command = {_toml_string(launch.command)}",
            "args = [" + ", ".join(_toml_string(a) for a in launch.args) + "]",
            f"startup_timeout_sec = {STARTUP_TIMEOUT_SECONDS}",
            f"tool_timeout_sec = {TOOL_TIMEOUT_SECONDS}",
        ]
        if launch.env:
            lines += ["", f"[mcp_servers.{SERVER_NAME}.env]"]
            lines += [f"{_toml_string(k)} = {_toml_string(v)}" for k, v in launch.env.items()]
        return "\n".join(lines) + "\n"
    entry: dict[str, object] = {"command": launch.command, "args": list(launch.args)}
    entry["env"] = dict(launch.env)
    if client == "kimi":
        entry["startupTimeoutMs"] = STARTUP_TIMEOUT_SECONDS * 1000
        entry["toolTimeoutMs"] = TOOL_TIMEOUT_SECONDS * 1000
    else:  # Claude Code and Qoder read the same .mcp.json shape
        entry = {"type": "stdio", **entry, "timeout": TOOL_TIMEOUT_SECONDS * 1000}
    return json.dumps({"mcpServers": {SERVER_NAME: entry}}, indent=2) + "\n"


def _render_remote(client: str, remote: Remote) -> str:
    if client == "codex":  # the token from the CLI's environment, not from the file
        lines = [
            f"[mcp_servers.{SERVER_NAME}]",
            f"url = {_toml_string(remote.url)}",
            f"bearer_token_env_var = {_toml_string(TOKEN_VARIABLE)}",
            f"startup_timeout_sec = {STARTUP_TIMEOUT_SECONDS}",
            f"tool_timeout_sec = {TOOL_TIMEOUT_SECONDS}",
        ]
        return "\n".join(lines) + "\n"
    entry = {
        "type": "http",
        "url": remote.url,
        "headers": remote.headers,
        "timeout": TOOL_TIMEOUT_SECONDS * 1000,
    }
    return json.dumps({"mcpServers": {SERVER_NAME: entry}}, indent=2) + "\n"


def add_agent_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("client", choices=CLIENTS, help="which agent CLI the config is for")
    parser.add_argument("--task", help="bind the server to one run of this task")
    parser.add_argument("--run", help="name of the bound run (default: TASK-run)")
    parser.add_argument("--data-dir", type=Path, default=None, help="records directory to use")
    parser.add_argument(
        "--skill",
        type=Path,
        metavar="DIR",
        help="claude, codex: install the operator's skill under DIR (a project folder, or ~ "
        "for every project) instead of printing a config; never for an agent under test",
    )


def cmd_agent_config(args: argparse.Namespace) -> int:
    """Print a config for ``args.client`` with this machine's absolute paths."""
    client = getattr(args, "client", None) or args.agent
    task, run = getattr(args, "task", None), getattr(args, "run", None)
    data_dir = getattr(args, "data_dir", None)
    if run is not None and task is None:
        print("evopolicy-mcp agent-config: --run needs --task", file=sys.stderr)
        return 2
    skill_dir = getattr(args, "skill", None)
    if skill_dir is not None:
        from evopolicy_mcp.agents.skill import SKILL_HOMES, install_skill

        if client not in SKILL_HOMES:
            print(
                f"evopolicy-mcp agent-config: --skill is for {' and '.join(SKILL_HOMES)}",
                file=sys.stderr,
            )
            return 2
        print(f"installed the evopolicy-mcp skill in {install_skill(client, skill_dir)}")
        return 0
    launch = local_launch(task=task, run=run, data_dir=Path(data_dir) if data_dir else None)
    sys.stdout.write(render(client, launch))
    print(f"# {client}: {WHERE[client]}", file=sys.stderr)
    return 0
