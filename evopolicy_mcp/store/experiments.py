"""Experiments: a sweep's configuration and the runs of each of its cells, as files.

Layout, beside the SQLite records of the same data directory::

    experiments/<name>.json     the configuration and, per cell, its run attempts
    experiments/<name>.lock     held (flock) by the sweep working on the experiment
    experiments/<name>/logs/    one log per launched run

The file says which runs belong to the experiment; the state of each run is
read from the records, so a sweep killed at any moment loses nothing: a run
that was finished stays finished, and the file never claims more than the
records hold. Written atomically (:func:`~evopolicy_mcp.store.records.write_atomic`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evopolicy_mcp.store.records import StoreError, write_atomic

__all__ = [
    "EXPERIMENT_NAME",
    "Cell",
    "ExperimentRecord",
    "experiment_lock",
    "experiments_dir",
    "list_experiments",
    "read_experiment",
    "write_experiment",
]

EXPERIMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")


@dataclass
class Cell:
    """One point of the cross product: an agent on a task, one repeat."""

    task: str
    agent: str  # the provider: claude, codex, kimi, qoder, scripted
    model: str | None
    effort: str | None
    repeat: int  # 1-based
    attempts: list[str] = field(default_factory=list)  # run ids, the last one counts

    @property
    def key(self) -> tuple[str, str, str | None, str | None, int]:
        return (self.task, self.agent, self.model, self.effort, self.repeat)


@dataclass
class ExperimentRecord:
    name: str
    created: float
    config: dict[str, Any]
    cells: list[Cell]

    def runs(self) -> list[str]:
        """The run that counts for each cell (its last attempt), in cell order."""
        return [c.attempts[-1] for c in self.cells if c.attempts]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> ExperimentRecord:
        data = json.loads(text)
        return cls(
            name=data["name"],
            created=data["created"],
            config=data["config"],
            cells=[Cell(**c) for c in data["cells"]],
        )


def experiments_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "experiments"


def _path(data_dir: Path, name: str) -> Path:
    if not EXPERIMENT_NAME.fullmatch(name):
        raise StoreError(
            f"experiment name {name[:80]!r}: use 1-32 letters, digits, '_' or '-', "
            "starting with a letter or digit"
        )
    return experiments_dir(data_dir) / f"{name}.json"


def read_experiment(data_dir: Path, name: str) -> ExperimentRecord | None:
    try:
        text = _path(data_dir, name).read_text()
    except FileNotFoundError:
        return None
    try:
        return ExperimentRecord.from_json(text)
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"experiment {name}: unreadable record: {exc}") from None


def write_experiment(data_dir: Path, record: ExperimentRecord) -> None:
    write_atomic(_path(data_dir, record.name), record.to_json().encode())


def list_experiments(data_dir: Path) -> list[ExperimentRecord]:
    root = experiments_dir(data_dir)
    found = []
    for path in sorted(root.glob("*.json")) if root.is_dir() else []:
        record = read_experiment(data_dir, path.stem)
        if record is not None:
            found.append(record)
    return sorted(found, key=lambda r: (r.created, r.name))


@contextlib.contextmanager
def experiment_lock(data_dir: Path, name: str) -> Iterator[None]:
    """Hold the experiment for one sweep; a second sweep of it fails at once. The
    lock goes with the process, however it ends."""
    path = _path(data_dir, name).with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreError(
                f"experiment {name} is being worked on by another sweep; wait for it to end"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {time.time():.0f}\n".encode())
        yield
    finally:
        os.close(fd)
