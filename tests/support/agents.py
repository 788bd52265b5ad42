"""Shared pieces of the agent tests: fake CLIs on PATH, launcher options, run events."""

from __future__ import annotations

import stat
import sys
import textwrap
from pathlib import Path

from evopolicy_mcp.agents.launch import AgentOptions
from evopolicy_mcp.store.database import Store
from tests.support.host import SEED

SECRET = "operator-secret-7f3a91"


def fake_cli(bin_dir: Path, name: str, body: str) -> Path:
    """An executable ``name`` on a PATH directory: Python, run by this interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def options(tmp_path: Path, tasks_dir: Path, **kw: object) -> AgentOptions:
    base: dict[str, object] = {
        "agent": "claude",
        "task": "mini",
        "data_dir": tmp_path / "data",
        "tasks_dirs": (tasks_dir,),
        "workspace": tmp_path / "ws",
        "run": "r1",
        "seed": SEED,
        "timeout": 60.0,
        "grace": 0.5,
        "kill_after": 0.5,
        "judge_timeout": 120.0,
    }
    base.update(kw)
    return AgentOptions(**base)  # type: ignore[arg-type]


def events(data_dir: Path, run_id: str) -> dict[str, dict[str, object]]:
    store = Store(data_dir, create=False)
    try:
        return {e.kind: e.detail for e in store.events(run_id)}
    finally:
        store.close()
