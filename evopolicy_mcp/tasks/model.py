"""Task files: declarative TOML, validated by pydantic, loaded without running code.

A task names an adapter and its parameters, how episodes are scored, the
budget an agent gets, the validation and assessment sizes, the limits of each
policy process and a weak baseline policy. A file holds one task, or a family
of them (:mod:`evopolicy_mcp.tasks.families`: ids ``family/variant``). Built-in
tasks live in the package's ``tasks/builtin/``; more directories come from
``--tasks-dir`` or the ``EVOPOLICY_TASKS`` environment variable
(``os.pathsep``-separated). A later directory's task replaces a built-in one
with the same id. A task whose package extra is not installed is still listed;
:func:`unavailable` says what to install.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evopolicy_mcp.tasks.extras import install_command, missing_packages
from evopolicy_mcp.tasks.families import FamilyInfo, expand_family, is_family

__all__ = [
    "BUILTIN_TASKS_DIR",
    "SHARED_BASELINES",
    "Assessment",
    "Budget",
    "Catalog",
    "FamilyInfo",
    "Limits",
    "Score",
    "Task",
    "TaskError",
    "get_task",
    "Validation",
    "load_catalog",
    "load_file",
    "load_task_file",
    "load_tasks",
    "task_dirs",
    "task_family",
    "unavailable",
    "unknown_task",
]

BUILTIN_TASKS_DIR = Path(__file__).resolve().parent / "builtin"
# Baselines any task may name instead of a directory of its own (builtin/baselines/NAME).
SHARED_BASELINES = ("random", "noop")


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
    finish: Literal["early", "exhaust"] = Field(
        default="early",
        description="early: the budget is a maximum, finalize whenever; exhaust: finalize "
        "only once every episode is spent (agents compared at equal spend)",
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
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*(/[a-z0-9][a-z0-9_.-]*)?$")
    family: str = Field(
        default="",
        pattern=r"^([a-z0-9][a-z0-9_.-]*)?$",
        description="the family the task is listed under (default: its adapter)",
    )
    extra: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9_.-]*$",
        description="the package extra whose packages the environment needs",
    )
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
        description="a shared baseline (random, noop) or the path of a baseline program "
        "directory, relative to the task file"
    )
    trace_episodes: int = Field(
        default=2, ge=0, description="episodes per submission with a step trace"
    )
    trace_steps: int = Field(default=200, ge=0, description="steps kept per traced episode")
    storage_mb: float = Field(
        default=256,
        gt=0,
        description="most MiB of bulky feedback (step traces, replays, episode files) a run "
        "keeps; past it the oldest submissions' are evicted, never the newest's",
    )

    # Set by the loader, not by the file.
    source: Path | None = Field(default=None, exclude=True)
    digest: str = Field(default="", exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _family_defaults_to_the_adapter(cls, data: Any) -> Any:
        if (
            isinstance(data, dict)
            and not data.get("family")
            and isinstance(data.get("adapter"), str)
        ):
            return {**data, "family": data["adapter"]}
        return data

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
        if self.baseline in SHARED_BASELINES:
            return BUILTIN_TASKS_DIR / "baselines" / self.baseline
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


def unavailable(task: Task) -> str | None:
    """Why ``task`` cannot run here (its extra is not installed), in one line; else None."""
    if task.extra is None:
        return None
    missing = missing_packages(task.extra)
    if not missing:
        return None
    return (
        f"task {task.id!r} needs the [{task.extra}] extra, which is not installed here "
        f"(missing: {', '.join(missing[:4])}); install it with: {install_command(task.extra)} "
        f'(from a clone: pip install -e ".[{task.extra}]"; name several extras in one call, '
        f'e.g. ".[all]")'
    )


def _format_validation_error(path: Path, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown key {where!r}")
        else:
            parts.append(f"{where}: {err['msg']}")
    return f"{path}: " + "; ".join(parts)


def _read(path: Path) -> tuple[dict[str, Any], bytes]:
    try:
        raw = path.read_bytes()
        return tomllib.loads(raw.decode("utf-8")), raw
    except OSError as exc:
        raise TaskError(f"{path}: cannot read task file: {exc.strerror}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path}: not valid TOML: {exc}") from exc


def _task(data: dict[str, Any], path: Path, digest: str) -> Task:
    for key in ("source", "digest"):
        if key in data:
            raise TaskError(f"{path}: unknown key {key!r}")
    try:
        task = Task.model_validate(data)
    except ValidationError as exc:
        where = path if "/" not in str(data.get("id", "")) else f"{path} ({data['id']})"
        raise TaskError(_format_validation_error(Path(str(where)), exc)) from None
    return task.model_copy(update={"source": path.resolve(), "digest": digest})


def load_task_file(path: Path) -> Task:
    """Parse and validate one task file; errors name the file and the key."""
    data, raw = _read(path)
    if is_family(data):
        raise TaskError(f"{path}: a family file holds several tasks; load it with load_catalog")
    return _task(data, path, hashlib.sha256(raw).hexdigest())


def load_file(path: Path) -> tuple[FamilyInfo | None, list[Task]]:
    """The tasks of a task file or a family file (with its family); errors name the file,
    the variant and the key."""
    data, raw = _read(path)
    if not is_family(data):
        return None, [_task(data, path, hashlib.sha256(raw).hexdigest())]
    try:
        family, tables = expand_family(data)
    except ValueError as exc:
        raise TaskError(f"{path}: {exc}") from None
    tasks = []
    for table in tables:
        digest = hashlib.sha256(raw + b"\0" + table["id"].encode()).hexdigest()
        tasks.append(_task(table, path, digest))
    return family, tasks


class Catalog:
    """Every task by id (in id order) and every declared family by id."""

    def __init__(self, tasks: dict[str, Task], families: dict[str, FamilyInfo]) -> None:
        self.tasks = tasks
        self.families = families

    def family_of(self, task: Task) -> FamilyInfo:
        return self.families.get(task.family) or FamilyInfo(task.family, task.family, "", None)


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


def load_catalog(extra_dirs: Iterable[str | os.PathLike[str]] = ()) -> Catalog:
    """All tasks and families of the task directories. A missing directory is an error
    only when it was asked for explicitly."""
    tasks: dict[str, Task] = {}
    families: dict[str, FamilyInfo] = {}
    for directory in task_dirs(extra_dirs):
        if not directory.is_dir():
            if directory != BUILTIN_TASKS_DIR:
                raise TaskError(f"tasks directory {directory} does not exist")
            continue
        here: dict[str, Path] = {}  # a family may span files of one directory (one per game)
        for path in sorted(directory.glob("*.toml")):
            family, found = load_file(path)
            if family is not None:
                first = here.setdefault(family.id, path)
                known = families.get(family.id)
                if first != path and known is not None and _described(known) != _described(family):
                    raise TaskError(
                        f"{path}: family {family.id!r} is also declared in {first.name} with "
                        "another title, summary or extra; the files of a family must agree"
                    )
                families[family.id] = family
            tasks.update((t.id, t) for t in found)
    return Catalog(dict(sorted(tasks.items())), families)


def _described(family: FamilyInfo) -> tuple[str, str, str | None]:
    return family.title, family.summary, family.extra


def load_tasks(extra_dirs: Iterable[str | os.PathLike[str]] = ()) -> dict[str, Task]:
    """All tasks by id, in id order."""
    return load_catalog(extra_dirs).tasks


def unknown_task(task_id: object, tasks: Mapping[str, Task]) -> str:
    """One bounded line for a task id that is not among ``tasks``: every id when there are
    few, else the nearest ids and the families."""
    shown = repr(task_id) if len(repr(task_id)) <= 80 else repr(task_id)[:77] + "..."
    if len(tasks) <= 30:
        return f"unknown task {shown}; known tasks: {', '.join(tasks) or 'none'}"
    near = difflib.get_close_matches(str(task_id)[:200], list(tasks), n=3, cutoff=0.6)
    hint = f" (did you mean {', '.join(map(repr, near))}?)" if near else ""
    families = sorted({t.family for t in tasks.values()})
    listed = ", ".join(families[:20]) + (", ..." if len(families) > 20 else "")
    return f"unknown task {shown}{hint}; {len(tasks)} tasks in families {listed}"


def get_task(task_id: str, extra_dirs: Iterable[str | os.PathLike[str]] = ()) -> Task:
    tasks = load_tasks(extra_dirs)
    if task_id not in tasks:
        raise TaskError(unknown_task(task_id, tasks))
    return tasks[task_id]
