"""Task files: declarative TOML, validated by pydantic, loaded without running code.

A task names an adapter and its parameters, how episodes are scored, the
budget an agent gets, the validation and assessment sizes, the limits of each
policy process and a weak baseline policy. Built-in tasks live in the
repository's ``tasks/``; more directories come from ``--tasks-dir`` or the
``EVOPOLICY_TASKS`` environment variable (``os.pathsep``-separated). A later
directory's task replaces a built-in one with the same id.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

__all__ = [
    "BUILTIN_TASKS_DIR",
    "Assessment",
    "Budget",
    "Limits",
    "Score",
    "Task",
    "TaskError",
    "get_task",
    "Validation",
    "load_task_file",
    "load_tasks",
    "task_dirs",
    "task_family",
]

BUILTIN_TASKS_DIR = Path(__file__).resolve().parent / "builtin"


class TaskError(Exception):
    """A task file is missing, malformed or names something unknown."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Score(_Strict):
    metric: str = Field(default="return", description="per-episode metric the score aggregates")
    aggregate: str = Field(
        default="mean", description="mean | median | min | max, or a scorer the adapter provides"
    )
    direction: Literal["maximize", "minimize"] = "maximize"
    failure_value: float = Field(
        description="value of the metric for an episode that ended in a policy failure"
    )
    description: str = ""
    # Normalised scores across a family: (score - baseline) / (reference - baseline).
    baseline_score: float | None = Field(
        default=None, description="the task's baseline program's score, measured (normalised 0)"
    )
    reference_score: float | None = Field(
        default=None, description="a stated reference score (normalised 1)"
    )
    reference: str = Field(
        default="", description="what the reference and baseline scores are, and their sources"
    )


class Budget(_Strict):
    episodes: int = Field(ge=1, description="total training episodes an agent may spend")
    submissions: int = Field(ge=1, description="most submissions per run")
    per_submission: int = Field(ge=1, description="most episodes in one submission")
    pool: int = Field(ge=1, description="size of the hidden training pool (indices 0..pool-1)")
    wall_seconds: float | None = Field(
        default=None, gt=0, description="optional wall-clock limit of a run"
    )


class Validation(_Strict):
    episodes: int = Field(ge=1, description="hidden validation episodes per candidate")
    candidates: int = Field(ge=1, description="most candidates an agent may hand over")


class Assessment(_Strict):
    episodes: int = Field(ge=1, description="held-out assessment episodes of the selected program")


class Limits(_Strict):
    act_seconds: float = Field(
        default=1.0, gt=0, description="wall-clock deadline of one act() call"
    )
    startup_seconds: float = Field(
        default=10.0, gt=0, description="deadline for imports and make_policy"
    )
    episode_seconds: float = Field(
        default=60.0, gt=0, description="wall-clock deadline of one episode"
    )
    memory_mb: int = Field(
        default=2048, ge=64, description="address-space limit of the policy process"
    )
    cpu_seconds: int = Field(default=60, ge=1, description="CPU-time limit of the policy process")


class Task(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    title: str
    summary: str = Field(description="one line for task lists")
    description: str = Field(
        description="written for the agent: goal, observations, actions, scoring"
    )
    adapter: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    score: Score
    budget: Budget
    validation: Validation
    assessment: Assessment
    limits: Limits = Limits()
    baseline: str = Field(
        description="path of the baseline program directory, relative to the task file"
    )
    trace_episodes: int = Field(
        default=2, ge=0, description="episodes per submission with a step trace"
    )
    trace_steps: int = Field(default=200, ge=0, description="steps kept per traced episode")

    # Set by the loader, not by the file.
    source: Path | None = Field(default=None, exclude=True)
    digest: str = Field(default="", exclude=True)

    @model_validator(mode="after")
    def _budget_is_coherent(self) -> Task:
        b = self.budget
        if b.per_submission > b.episodes:
            raise ValueError("budget.per_submission cannot exceed budget.episodes")
        if b.per_submission > b.pool:
            raise ValueError("budget.per_submission cannot exceed budget.pool")
        return self

    def with_tracing(self, *, every_episode: bool, steps: int | None = None) -> Task:
        """This task for a dataset-building run: every episode of a training submission
        traced (``every_episode``), ``steps`` steps kept per trace (default: the task's)."""
        update: dict[str, int] = {}
        if every_episode:
            update["trace_episodes"] = self.budget.per_submission
        if steps is not None:
            update["trace_steps"] = steps
        return self.model_copy(update=update)

    @property
    def baseline_dir(self) -> Path:
        base = self.source.parent if self.source else Path.cwd()
        return (base / self.baseline).resolve()


def task_family(task: Task | dict[str, Any]) -> str:
    """A task's family: its declared one, else the part of its id before '/', else its
    adapter (``cartpole`` is in ``gymnasium``, ``minigrid/doorkey-8x8`` in ``minigrid``)."""
    data = task if isinstance(task, dict) else task.model_dump()
    declared = data.get("family")
    if isinstance(declared, str) and declared:
        return declared
    task_id = str(data.get("id", ""))
    return task_id.split("/", 1)[0] if "/" in task_id else str(data.get("adapter", "-"))


def _format_validation_error(path: Path, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown key {where!r}")
        else:
            parts.append(f"{where}: {err['msg']}")
    return f"{path}: " + "; ".join(parts)


def load_task_file(path: Path) -> Task:
    """Parse and validate one task file; errors name the file and the key."""
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise TaskError(f"{path}: cannot read task file: {exc.strerror}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path}: not valid TOML: {exc}") from exc
    for key in ("source", "digest"):
        if key in data:
            raise TaskError(f"{path}: unknown key {key!r}")
    try:
        task = Task.model_validate(data)
    except ValidationError as exc:
        raise TaskError(_format_validation_error(path, exc)) from None
    return task.model_copy(
        update={"source": path.resolve(), "digest": hashlib.sha256(raw).hexdigest()}
    )


def task_dirs(extra: Iterable[str | os.PathLike[str]] = (), *, builtin: bool = True) -> list[Path]:
    """The built-in directory, then ``EVOPOLICY_TASKS`` entries, then ``extra``.

    ``builtin=False`` leaves out the built-in directory: the operator's own task
    directories, which policy processes must not read. The built-in tasks ship
    inside the package, whose files an installed runtime exposes anyway, and
    hold nothing that ``describe_task`` does not publish.
    """
    dirs = [BUILTIN_TASKS_DIR] if builtin else []
    env = os.environ.get("EVOPOLICY_TASKS", "")
    dirs += [Path(p) for p in env.split(os.pathsep) if p]
    dirs += [Path(p) for p in extra]
    return dirs


def load_tasks(extra_dirs: Iterable[str | os.PathLike[str]] = ()) -> dict[str, Task]:
    """All tasks by id, in id order. A missing directory is an error only when
    it was asked for explicitly."""
    tasks: dict[str, Task] = {}
    for directory in task_dirs(extra_dirs):
        if not directory.is_dir():
            if directory != BUILTIN_TASKS_DIR:
                raise TaskError(f"tasks directory {directory} does not exist")
            continue
        for path in sorted(directory.glob("*.toml")):
            task = load_task_file(path)
            tasks[task.id] = task
    return dict(sorted(tasks.items()))


def get_task(task_id: str, extra_dirs: Iterable[str | os.PathLike[str]] = ()) -> Task:
    tasks = load_tasks(extra_dirs)
    if task_id not in tasks:
        known = ", ".join(tasks) or "none"
        raise TaskError(f"unknown task {task_id!r}; known tasks: {known}")
    return tasks[task_id]
