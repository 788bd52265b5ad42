"""``agent check``: is the CLI installed, which version, can it reach the server.

Claude Code and Qoder have a health check that starts each configured server
without a login (``claude mcp list``, ``qodercli mcp list``): it runs against
a generated config, in a scratch directory, and its verdict is parsed. Codex
and Kimi Code have none that starts servers, so the server command their
config names is started by this package's own MCP client instead, and the
report says so.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import anyio

from evopolicy_mcp.agents.config import SERVER_NAME, Launch, local_launch, render

from .base import Provider, allowed_env
from .codex import overrides
from .procs import run_bounded

__all__ = ["CheckReport", "check_agent", "client_check", "parse_health"]

VERSION_TIMEOUT = 30.0
HEALTH_TIMEOUT = 90.0

# "evopolicy: cmd args - ✔ Connected" (Claude); "✓ evopolicy: cmd (stdio) - Connected · ..." (Qoder)
_HEALTH_LINE = re.compile(rf"^\W*{SERVER_NAME}: .* - (?P<verdict>.+)$")


@dataclass
class CheckReport:
    agent: str
    executable: str | None
    version: str | None
    server: str  # "Connected", "Failed", or "not checked"
    how: str  # which check gave ``server``
    detail: str = ""
    warning: str | None = None

    @property
    def ok(self) -> bool:
        """Installed, answering, connected, and able to run headless here."""
        return (
            self.executable is not None
            and self.version is not None
            and self.server == "Connected"
            and self.warning is None
        )


def parse_health(output: str) -> tuple[str, str]:
    """The verdict on our server in ``claude mcp list`` / ``qodercli mcp list`` output."""
    for line in output.splitlines():
        m = _HEALTH_LINE.match(line.strip())
        if m:
            verdict = m.group("verdict").strip()
            connected = re.search(r"\bConnected\b", verdict) and "Disconnected" not in verdict
            return ("Connected" if connected else "Failed"), verdict
    return "Failed", f"{SERVER_NAME} not in the output"


def client_check(
    launch: Launch, env: dict[str, str], timeout: float = HEALTH_TIMEOUT
) -> tuple[str, str]:
    """Start the server as ``launch`` says, over stdio, and call ``list_tasks``."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    async def go() -> str:
        params = StdioServerParameters(command=launch.command, args=list(launch.args), env=env)
        with anyio.fail_after(timeout):
            async with Client(params) as client:
                result = await client.call_tool("list_tasks", {})
        if result.is_error:
            raise RuntimeError("list_tasks returned an error")
        tasks = result.structured_content or {}
        count = len(tasks.get("result", [])) if isinstance(tasks, dict) else 0
        return f"list_tasks answered with {count} task(s)"

    try:
        return "Connected", anyio.run(go)
    except Exception as exc:  # any failure to start or answer is the verdict
        return "Failed", f"{type(exc).__name__}: {exc}"[:300]


def _version(executable: str, env: dict[str, str]) -> tuple[str | None, str]:
    """The CLI's version line, or None and why it could not say."""
    try:
        code, out = run_bounded(
            [executable, "--version"], cwd=None, env=env, timeout=VERSION_TIMEOUT
        )
    except OSError as exc:
        return None, f"cannot run {executable}: {exc.strerror}"
    except subprocess.TimeoutExpired:
        return None, f"{executable} --version gave no answer within {VERSION_TIMEOUT:g} s"
    lines = out.strip().splitlines()
    if code != 0 or not lines:
        last = lines[-1].strip() if lines else "no output"
        return None, f"{executable} --version failed (exit code {code}): {last}"[:300]
    return lines[0].strip(), ""


def check_agent(
    provider: Provider, *, tasks_dirs: tuple[Path, ...] = (), timeout: float = HEALTH_TIMEOUT
) -> CheckReport:
    env = allowed_env(provider)
    if provider.name == "scripted":
        executable: str | None = sys.executable
        version: str | None = f"evopolicy-mcp {metadata.version('evopolicy-mcp')}"
    else:
        executable = shutil.which(provider.executable, path=env.get("PATH"))
        version = None
    report = CheckReport(provider.name, executable, version, "not checked", "")
    report.warning = provider.preflight(env)
    if executable is None:
        report.detail = f"{provider.executable} is not on PATH"
        return report
    if provider.name != "scripted":
        report.version, why = _version(executable, env)
        if report.version is None:  # installed but broken (e.g. too old a Node.js)
            report.detail = why
            return report
    with tempfile.TemporaryDirectory(prefix="evopolicy-check-") as tmp:
        root = Path(tmp)
        ws = root / "workspace"
        ws.mkdir()
        launch = local_launch(data_dir=root / "data", tasks_dirs=tasks_dirs)
        try:
            if provider.name in ("claude", "qoder"):
                (ws / ".mcp.json").write_text(render(provider.name, launch))
                run_env = dict(env)
                if provider.name == "claude":
                    # Project servers need approval; a scratch config home gives it.
                    home = root / "claude-config"
                    home.mkdir()
                    (home / "settings.json").write_text(
                        json.dumps({"enableAllProjectMcpServers": True})
                    )
                    run_env["CLAUDE_CONFIG_DIR"] = str(home)
                _, out = run_bounded(
                    [executable, "mcp", "list"], cwd=ws, env=run_env, timeout=timeout
                )
                report.server, report.detail = parse_health(out)
                report.how = f"{provider.executable} mcp list"
                return report
            report.server, report.detail = client_check(launch, env, timeout)
            report.how = "evopolicy-mcp's own MCP client on the configured server command"
            if provider.name == "codex":
                _, out = run_bounded(
                    [executable, *overrides(launch), "mcp", "list"],
                    cwd=ws,
                    env=env,
                    timeout=timeout,
                )
                listed = any(line.split()[:1] == [SERVER_NAME] for line in out.splitlines())
                report.detail += "; codex mcp list " + (
                    "shows the server" if listed else "does not show the server"
                )
                if not listed:
                    report.server = "Failed"
        except subprocess.TimeoutExpired:
            report.server, report.detail = "Failed", f"no answer within {timeout:g} s"
        except OSError as exc:
            report.server, report.detail = "Failed", f"cannot run {executable}: {exc.strerror}"
    return report
