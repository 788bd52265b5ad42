"""What ``agent run`` is given and what it gives back."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evopolicy_mcp.evaluation.executors import EXECUTORS

__all__ = ["REASONS", "AgentError", "AgentOptions", "AgentOutcome", "executor_problem"]

REASONS = {
    "finalized": "the agent finalized the run",
    "exited": "the agent exited without finalizing",
    "timed_out": "the agent was stopped at the time limit",
    "failed_to_start": "the agent could not be launched, or ended without reaching its run",
    "interrupted": "the operator interrupted the launcher",
}


class AgentError(Exception):
    """Bad input to ``agent run`` (nothing was created): one line, exit code 2."""


@dataclass(frozen=True)
class AgentOptions:
    agent: str
    task: str
    data_dir: Path
    tasks_dirs: tuple[Path, ...] = ()
    workspace: Path | None = None
    run: str | None = None
    model: str | None = None
    effort: str | None = None
    timeout: float = 3600.0
    grace: float = 10.0  # after finalize, before the stop
    kill_after: float = 5.0  # SIGTERM -> SIGKILL
    judge_timeout: float = 3600.0
    seed: int | None = None
    isolation: str = "default"
    pass_env: tuple[str, ...] = ()  # extra operator variables the agent may see
    workers: int | None = None
    executor: str = "thread"  # where the run's server (and its judging) runs episodes
    ray_address: str | None = None
    trace_all: bool = False  # dataset-building runs: every training episode traced
    trace_steps: int | None = None
    finish: str | None = None  # the run's finish rule over its task's: early or exhaust
    storage_mb: float | None = None  # the run's cap of bulky feedback over its task's
    confine: str = "default"  # the agent's sandbox: default, strict or off


@dataclass
class AgentOutcome:
    run_id: str
    agent: str
    reason: str
    workspace: Path
    exit_code: int | None = None
    seconds: float = 0.0
    message: str = ""
    candidates: list[str] = field(default_factory=list)
    fallback: bool = False
    selected: str | None = None
    validation_score: float | None = None
    test_score: float | None = None
    run_state: str = "open"
    confinement: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["workspace"] = str(self.workspace)
        return out


def executor_problem(executor: str) -> str | None:
    """Why episodes cannot run on ``executor`` here (checked before anything is made)."""
    if executor not in EXECUTORS:
        return f"unknown executor {executor[:40]!r}; choose one of {', '.join(EXECUTORS)}"
    if executor == "ray" and importlib.util.find_spec("ray") is None:
        from evopolicy_mcp.evaluation.ray_executor import RAY_MISSING

        return RAY_MISSING
    return None
