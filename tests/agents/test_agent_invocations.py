"""The agent launcher's exact invocation of each CLI, the environment allowlist and
the options a CLI lacks: what it would run, checked without running it."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from evopolicy_mcp.agents.base import AgentTask, Unsupported, allowed_env
from evopolicy_mcp.agents.config import Launch
from evopolicy_mcp.agents.launch import PROVIDERS, write_files

SERVER = Launch(
    "/py", ("-m", "evopolicy_mcp", "serve", "--data-dir", "/data", "--task", "mini", "--run", "r1")
)
WS = Path("/ws")


def golden_task(model: str | None = "m1", effort: str | None = "high") -> AgentTask:
    return AgentTask(
        task_id="mini",
        run_id="r1",
        workspace=WS,
        state_dir=WS / ".agent",
        prompt="PROMPT",
        server=SERVER,
        model=model,
        effort=effort,
    )


CLAUDE_JSON = """{
  "mcpServers": {
    "evopolicy": {
      "type": "stdio",
      "command": "/py",
      "args": [
        "-m",
        "evopolicy_mcp",
        "serve",
        "--data-dir",
        "/data",
        "--task",
        "mini",
        "--run",
        "r1"
      ],
      "env": {},
      "timeout": 600000
    }
  }
}
"""
SERVER_TOML_ARGS = (
    '["-m", "evopolicy_mcp", "serve", "--data-dir", "/data", "--task", "mini", "--run", "r1"]'
)


def test_claude_invocation_is_exact() -> None:
    inv = PROVIDERS["claude"].invocation(golden_task(), {})
    assert inv.argv == (
        "claude",
        "--print",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "bypassPermissions",
        "--no-session-persistence",
        "--strict-mcp-config",
        "--mcp-config",
        "/ws/.mcp.json",
        "--model",
        "m1",
        "--effort",
        "high",
        "--",
        "PROMPT",
    )
    assert dict(inv.files) == {WS / ".mcp.json": CLAUDE_JSON}
    assert dict(inv.env) == {}


def test_qoder_invocation_is_exact() -> None:
    inv = PROVIDERS["qoder"].invocation(golden_task(), {})
    assert inv.argv == (
        "qodercli",
        "--print",
        "--output-format",
        "stream-json",
        "--permission-mode",
        "bypass_permissions",
        "--no-session-persistence",
        "--strict-mcp-config",
        "--mcp-config",
        "/ws/.mcp.json",
        "--model",
        "m1",
        "--reasoning-effort",
        "high",
        "--",
        "PROMPT",
    )
    assert dict(inv.files) == {WS / ".mcp.json": CLAUDE_JSON}


def test_codex_invocation_is_exact() -> None:
    inv = PROVIDERS["codex"].invocation(golden_task(), {})
    assert inv.argv == (
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--ephemeral",
        "--ignore-user-config",
        "--sandbox",
        "workspace-write",
        "--cd",
        "/ws",
        "-c",
        'approval_policy="never"',
        "-c",
        'mcp_servers.evopolicy.command="/py"',
        "-c",
        f"mcp_servers.evopolicy.args={SERVER_TOML_ARGS}",
        "-c",
        "mcp_servers.evopolicy.startup_timeout_sec=30",
        "-c",
        "mcp_servers.evopolicy.tool_timeout_sec=600",
        "--model",
        "m1",
        "-c",
        'model_reasoning_effort="high"',
        "--",
        "PROMPT",
    )
    assert dict(inv.files) == {} and dict(inv.env) == {}  # all on the command line


def test_kimi_invocation_is_exact() -> None:
    inv = PROVIDERS["kimi"].invocation(golden_task(effort=None), {"HOME": "/home/op"})
    assert inv.argv == (
        "kimi",
        "--output-format",
        "stream-json",
        "--model",
        "m1",
        "--prompt",
        "PROMPT",
    )
    home = WS / ".agent" / "kimi-home"
    entry = json.loads(inv.files[home / "mcp.json"])["mcpServers"]["evopolicy"]
    assert entry == {
        "command": "/py",
        "args": list(SERVER.args),
        "env": {},
        "startupTimeoutMs": 30000,
        "toolTimeoutMs": 600000,
    }
    assert dict(inv.env) == {"KIMI_CODE_HOME": str(home)}
    assert dict(inv.overlays) == {home: Path("/home/op/.kimi-code")}
    # An operator's own Kimi home wins over the default location.
    other = PROVIDERS["kimi"].invocation(golden_task(effort=None), {"KIMI_CODE_HOME": "/k"})
    assert dict(other.overlays) == {home: Path("/k")}


def test_scripted_invocation_is_exact() -> None:
    inv = PROVIDERS["scripted"].invocation(golden_task(model=None, effort=None), {})
    assert inv.argv == (
        sys.executable,
        "-m",
        "evopolicy_mcp.agents.scripted_agent",
        "--mcp-config",
        "/ws/.mcp.json",
        "--task",
        "mini",
        "--",
        "PROMPT",
    )
    assert dict(inv.files) == {WS / ".mcp.json": CLAUDE_JSON}


def test_options_a_cli_lacks_are_refused() -> None:
    with pytest.raises(Unsupported, match="effort"):
        PROVIDERS["kimi"].invocation(golden_task(), {})
    with pytest.raises(Unsupported, match="no model"):
        PROVIDERS["scripted"].invocation(golden_task(effort=None), {})


def test_allowlist_keeps_only_named_variables() -> None:
    source = {
        "PATH": "/bin",
        "HOME": "/h",
        "LC_ALL": "C",
        "ANTHROPIC_API_KEY": "a",
        "OPENAI_API_KEY": "o",
        "AWS_SECRET_ACCESS_KEY": "x",
        "EVOPOLICY_TOKEN": "t",
        "MY_VAR": "m",
    }
    assert allowed_env(PROVIDERS["claude"], source) == {
        "PATH": "/bin",
        "HOME": "/h",
        "LC_ALL": "C",
        "ANTHROPIC_API_KEY": "a",
    }
    assert allowed_env(PROVIDERS["codex"], source, ("MY_*",)) == {
        "PATH": "/bin",
        "HOME": "/h",
        "LC_ALL": "C",
        "OPENAI_API_KEY": "o",
        "MY_VAR": "m",
    }


def test_claude_as_root_needs_a_declared_sandbox() -> None:
    claude = PROVIDERS["claude"]
    if os.geteuid() != 0:
        assert claude.preflight({}) is None
        return
    assert "IS_SANDBOX=1" in (claude.preflight({}) or "")
    assert claude.preflight({"IS_SANDBOX": "1"}) is None


def test_kimi_session_home_links_the_operators_home_but_not_its_servers(tmp_path: Path) -> None:
    mine = tmp_path / "operator-kimi"
    mine.mkdir()
    (mine / "config.toml").write_text("default_model = 'k'\n")
    (mine / "credentials").mkdir()
    (mine / "mcp.json").write_text('{"mcpServers": {"other": {"command": "x"}}}')
    task = replace(golden_task(effort=None), workspace=tmp_path / "ws", state_dir=tmp_path / "st")
    inv = PROVIDERS["kimi"].invocation(task, {"KIMI_CODE_HOME": str(mine)})
    write_files(inv)
    home = tmp_path / "st" / "kimi-home"
    assert (home / "config.toml").resolve() == mine / "config.toml"
    assert (home / "credentials").is_symlink()
    assert not (home / "mcp.json").is_symlink()
    assert list(json.loads((home / "mcp.json").read_text())["mcpServers"]) == ["evopolicy"]
    assert (mine / "mcp.json").read_text().startswith('{"mcpServers": {"other"')  # unchanged
