"""The shipped agent CLI configs and `evopolicy-mcp agent-config`."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from evopolicy_mcp.agents.config import CLIENTS, SHIPPED_FILES, render, shipped_launch

CONFIGS = Path(__file__).resolve().parents[2] / "agent_configs"


def _parse(client: str, text: str) -> dict[str, Any]:
    """The server entry of a config, whatever the client's format."""
    if client == "codex":
        return dict(tomllib.loads(text)["mcp_servers"]["evopolicy"])
    return dict(json.loads(text)["mcpServers"]["evopolicy"])


@pytest.mark.parametrize("client", CLIENTS)
def test_the_shipped_config_is_what_the_generator_writes(client: str) -> None:
    path = CONFIGS / SHIPPED_FILES[client]
    assert path.read_text() == render(client, shipped_launch()), (
        f"regenerate {path.name} with evopolicy_mcp.agents.config.render"
    )


@pytest.mark.parametrize("client", CLIENTS)
def test_every_shipped_config_parses_and_starts_evopolicy_serve(client: str) -> None:
    entry = _parse(client, (CONFIGS / SHIPPED_FILES[client]).read_text())
    assert entry["command"] == "evopolicy-mcp" and entry["args"] == ["serve"]
    # submit_policy may wait 50 s; no config may cut a call off before that.
    if client == "codex":
        assert entry["tool_timeout_sec"] > 60 and entry["startup_timeout_sec"] >= 10
    elif client == "kimi":
        assert entry["toolTimeoutMs"] > 60_000 and entry["startupTimeoutMs"] >= 10_000
    else:
        assert entry["type"] == "stdio" and entry["timeout"] > 60_000


@pytest.mark.parametrize("client", CLIENTS)
def test_agent_config_prints_this_machines_absolute_command(client: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "evopolicy_mcp",
            "agent-config",
            client,
            "--task",
            "cartpole",
            "--data-dir",
            str(tmp_path / "records"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    entry = _parse(client, proc.stdout)
    assert Path(entry["command"]).is_absolute() and Path(entry["command"]).exists()
    args = entry["args"]
    assert args[:3] == ["-m", "evopolicy_mcp", "serve"]
    assert args[args.index("--data-dir") + 1] == str((tmp_path / "records").resolve())
    assert args[args.index("--task") + 1] == "cartpole" and "--run" in args


def test_the_printed_command_really_starts_the_server(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "evopolicy_mcp",
            "agent-config",
            "claude",
            "--data-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    entry = _parse("claude", proc.stdout)
    ping = '{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    served = subprocess.run(
        [entry["command"], *entry["args"]], input=ping, capture_output=True, text=True, timeout=60
    )
    assert served.returncode == 0, served.stderr
    assert json.loads(served.stdout.splitlines()[0]) == {"jsonrpc": "2.0", "id": 1, "result": {}}
