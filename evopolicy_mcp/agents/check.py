"""``agent check``: is the CLI installed, which version, can it reach the server,
and how ``agent run`` would confine it.

A server is started as ``agent run`` starts one (its own process, loopback
HTTP, a token) on a scratch data directory. Claude Code and Qoder have a
health check that connects to each configured server without a login
(``claude mcp list``, ``qodercli mcp list``): it runs confined, against a
generated config in a scratch workspace, and its verdict is parsed. Codex and
Kimi Code have none that connects, so this package's own MCP client reaches
the server as their config says (Kimi Code's through the ``connect`` proxy),
and the report says so; ``codex mcp list`` must list it too.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio

from evopolicy_mcp.agents.config import (
    SERVER_NAME,
    TOKEN_VARIABLE,
    Launch,
    Remote,
    proxy_launch,
    render,
)

from .base import Provider, allowed_env
from .codex import overrides
from .confine import ConfineError, Reach, jail_for
from .endpoint import RunServer, ServerError
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
    confinement: dict[str, Any] = field(default_factory=dict)  # as `agent run` would have it

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
    server: Launch | Remote, env: dict[str, str], timeout: float = HEALTH_TIMEOUT
) -> tuple[str, str]:
    """Reach the server as configured (start it over stdio, or over HTTP) and call
    ``list_tasks``."""
    from mcp import Client

    from .client import transport

    async def go() -> str:
        with anyio.fail_after(timeout):
            async with Client(transport(server, env)) as client:
                result = await client.call_tool("list_tasks", {})
        if result.is_error:
            raise RuntimeError("list_tasks returned an error")
        tasks = result.structured_content or {}
        count = tasks.get("total", 0) if isinstance(tasks, dict) else 0
        return f"list_tasks answered with {count} task(s)"

    try:
        return "Connected", anyio.run(go)
    except Exception as exc:  # any failure to start or answer is the verdict
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]  # type: ignore[assignment]
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
    provider: Provider,
    *,
    tasks_dirs: tuple[Path, ...] = (),
    timeout: float = HEALTH_TIMEOUT,
    confine: str = "default",
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
        report.detail = f"{provider.executable} is not on PATH ({provider.package})"
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
        server = RunServer(root / "data", tasks_dirs=tasks_dirs)
        try:
            remote = server.bind()
            server.start(root)
            _health(report, provider, executable, env, root, remote, confine, timeout)
        except ServerError as exc:
            report.server, report.detail = "Failed", f"the server did not start: {exc}"
        except ConfineError as exc:
            report.detail = str(exc)
        except subprocess.TimeoutExpired:
            report.server, report.detail = "Failed", f"no answer within {timeout:g} s"
        except OSError as exc:
            report.server, report.detail = "Failed", f"cannot run {executable}: {exc.strerror}"
        finally:
            server.stop()
    return report


def _health(
    report: CheckReport,
    provider: Provider,
    executable: str,
    env: dict[str, str],
    root: Path,
    remote: Remote,
    confine: str,
    timeout: float,
) -> None:
    """Reach the server from a generated config: through the CLI's own health check
    where it has one, run confined as ``agent run`` runs the CLI; else with this
    package's client (Kimi Code's config starts the stdio proxy, which this runs)."""
    ws = root / "workspace"
    run_env = dict(env)
    if provider.name == "claude":
        # Project servers need approval; a scratch config home gives it.
        home = root / "claude-config"
        home.mkdir()
        (home / "settings.json").write_text(json.dumps({"enableAllProjectMcpServers": True}))
        run_env["CLAUDE_CONFIG_DIR"] = str(home)
    reach = Reach(ws, executable, provider.config_paths(run_env), (root / "data",))
    jail = jail_for(confine, reach, run_env)
    report.confinement = jail.record
    try:
        run_env.update(jail.env)
        if provider.name in ("claude", "qoder"):
            (ws / ".mcp.json").write_text(render(provider.name, remote))
            with jail.command([executable, "mcp", "list"]) as (argv, fds):
                _, out = run_bounded(argv, cwd=ws, env=run_env, timeout=timeout, pass_fds=fds)
            report.server, report.detail = parse_health(out)
            report.how = f"{provider.executable} mcp list"
            return
        launch = proxy_launch(remote) if provider.name == "kimi" else remote
        report.server, report.detail = client_check(launch, env, timeout)
        report.how = "evopolicy-mcp's own MCP client on the configured server"
        if provider.name == "codex":
            argv = [executable, *overrides(remote), "mcp", "list"]
            with jail.command(argv) as (argv, fds):
                _, out = run_bounded(
                    argv,
                    cwd=ws,
                    env={**run_env, TOKEN_VARIABLE: remote.token},
                    timeout=timeout,
                    pass_fds=fds,
                )
            listed = any(line.split()[:1] == [SERVER_NAME] for line in out.splitlines())
            report.detail += "; codex mcp list " + (
                "shows the server" if listed else "does not show the server"
            )
            if not listed:
                report.server = "Failed"
    finally:
        jail.close()
