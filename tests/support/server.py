"""Shared pieces of the MCP-server tests: a small cartpole task, programs, call helpers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mcp import Client

from evopolicy_mcp.cli.demo import IMPROVED_POLICY
from evopolicy_mcp.tasks.model import BUILTIN_TASKS_DIR
from tests.support import host as host_support

MINI = "cartpole-mini"
BASELINE_DIR = BUILTIN_TASKS_DIR / "baselines" / "random"

PD_FILES = {"policy.py": IMPROVED_POLICY}
BASELINE_FILES = {"policy.py": (BASELINE_DIR / "policy.py").read_text()}

# Slow to start, then a good controller: evaluations last long enough to watch.
SLOW_POLICY = (
    "import time\n\n"
    "def make_policy(context):\n"
    "    time.sleep({delay})\n"
    "    return Controller()\n\n"
    "class Controller:\n"
    "    def act(self, observation):\n"
    "        return 1 if observation[2] + 0.3 * observation[3] > 0 else 0\n"
)

CRASHING_FILES = {
    "policy.py": (
        "def make_policy(context):\n"
        "    return Crasher()\n\n"
        "class Crasher:\n"
        "    def __init__(self):\n"
        "        self.steps = 0\n\n"
        "    def act(self, observation):\n"
        "        self.steps += 1\n"
        "        if self.steps > 3:\n"
        "            raise ValueError('deliberate crash after three steps')\n"
        "        return 0\n"
    )
}


def serve_argv(data_dir: Path, *extra: str) -> list[str]:
    """The command line of a real ``evopolicy-mcp serve`` subprocess on ``data_dir``."""
    return [sys.executable, "-m", "evopolicy_mcp", "serve", "--data-dir", str(data_dir), *extra]


def slow_files(delay: float) -> dict[str, str]:
    return {"policy.py": SLOW_POLICY.format(delay=delay)}


def write_task(
    directory: Path,
    task_id: str = MINI,
    *,
    validation: int = 4,
    assessment: int = 4,
    **budget: Any,
) -> Path:
    """A cartpole task with a small budget in ``directory``; returns the task file."""
    host_support.write_task(
        directory, task_id, validation=validation, assessment=assessment, **budget
    )
    return directory / f"{task_id}.toml"


def make_tasks_dir(directory: Path) -> Path:
    """The tasks the server tests use: small, timed, leak-scan and broken variants."""
    write_task(directory)
    write_task(directory, "cartpole-timed", wall_seconds=0.5)
    # Odd split sizes make hidden means unlike any public number, so a leak is visible.
    write_task(directory, "cartpole-leak", validation=7, assessment=9)
    (directory / "broken.toml").write_text(
        (directory / f"{MINI}.toml")
        .read_text()
        .replace(f'id = "{MINI}"', 'id = "broken"')
        .replace('adapter = "gymnasium"', 'adapter = "no-such-adapter"')
    )
    return directory


def error_text(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; returns its structured content."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} failed: {error_text(result)}"
    assert result.structured_content is not None
    return dict(result.structured_content)


async def call_error(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail; returns the error text the agent reads."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} unexpectedly succeeded: {result.structured_content}"
    return error_text(result)


async def usage(client: Client, run_id: str) -> tuple[int, int]:
    """(episodes used, submissions used) of a run, as the agent sees them."""
    status = await call(client, "run_status", run_id=run_id)
    return status["episodes_used"], status["submissions_used"]


async def submit(client: Client, run_id: str, episodes: str, files: dict[str, str]) -> dict:
    return await call(client, "submit_policy", run_id=run_id, episodes=episodes, files=files)
