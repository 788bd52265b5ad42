"""Record types of the run store and its SQLite schema. A leaf, like the store.

The dataclasses are plain snapshots of rows; :mod:`evopolicy_mcp.store.database` is the
only writer. ``RunRecord.secret`` is the per-run secret: it never leaves the
host (it is left out of ``repr`` so a log line cannot show it).
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "SCHEMA",
    "EventRecord",
    "Rejected",
    "ResultRecord",
    "RunRecord",
    "StoreError",
    "SubmissionRecord",
    "Usage",
    "event_record",
    "result_record",
    "run_record",
    "submission_record",
    "stranding",
    "write_atomic",
]

SCHEMA = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    task_digest TEXT NOT NULL,
    task_json TEXT NOT NULL,
    secret BLOB NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('open', 'finalizing', 'finalized')),
    created REAL NOT NULL,
    deadline REAL,
    budget_json TEXT NOT NULL,
    candidates_json TEXT,
    selected TEXT,
    selection_reason TEXT,
    finalized REAL,
    error TEXT,
    owner TEXT,
    reproducibility_json TEXT NOT NULL,
    client TEXT
);
CREATE TABLE submissions (
    run_id TEXT NOT NULL REFERENCES runs(id),
    id TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    selector TEXT NOT NULL,
    indices_json TEXT NOT NULL,
    charged INTEGER NOT NULL CHECK (charged >= 0),
    program_digest TEXT NOT NULL,
    program_json TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('reserved', 'evaluating', 'complete', 'refunded')),
    score REAL,
    policy_failures INTEGER,
    failures_json TEXT,
    message TEXT,
    owner TEXT,
    created REAL NOT NULL,
    started REAL,
    finished REAL,
    PRIMARY KEY (run_id, id),
    UNIQUE (run_id, ordinal)
);
CREATE TABLE results (
    run_id TEXT NOT NULL,
    submission_id TEXT NOT NULL,
    split TEXT NOT NULL CHECK (split IN ('validation', 'test')),
    episodes INTEGER NOT NULL,
    score REAL,
    policy_failures INTEGER NOT NULL,
    failures_json TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (run_id, submission_id, split),
    FOREIGN KEY (run_id, submission_id) REFERENCES submissions(run_id, id)
);
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    run_id TEXT REFERENCES runs(id),
    submission_id TEXT,
    kind TEXT NOT NULL,
    detail_json TEXT NOT NULL
);
CREATE INDEX events_by_run ON events(run_id, seq);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
"""


class StoreError(Exception):
    """The records cannot be opened or written."""


class Rejected(Exception):
    """A transaction refused a request; ``code`` names the rule, ``info`` the numbers."""

    def __init__(self, code: str, **info: Any) -> None:
        super().__init__(code, info)
        self.code = code
        self.info = info


def stranding(
    episodes: int, submissions: int, per_submission: int, used: int, count: int, requested: int
) -> Rejected | None:
    """Under ``finish = exhaust``: the refusal of a request that would leave more episodes
    than the submissions after it can spend, or None. The store repeats it atomically."""
    left = episodes - used - requested
    subs_after = submissions - count - 1
    if left <= subs_after * per_submission:
        return None
    least = episodes - used - subs_after * per_submission
    return Rejected(
        "would_strand_budget", requested=requested, left=left, submissions=subs_after, least=least
    )


@dataclass(frozen=True)
class RunRecord:
    id: str
    task_id: str
    task_digest: str
    task_json: str
    secret: bytes = field(repr=False)
    state: str
    created: float
    deadline: float | None
    budget: dict[str, Any]
    candidates: list[str] | None
    selected: str | None
    selection_reason: str | None
    finalized: float | None
    error: str | None
    owner: str | None
    reproducibility: dict[str, Any]
    client: str | None = None  # the MCP client the run belongs to, if one was named


@dataclass(frozen=True)
class SubmissionRecord:
    run_id: str
    id: str
    ordinal: int
    selector: str
    indices: tuple[int, ...]
    charged: int
    program_digest: str
    program: dict[str, Any]
    state: str
    score: float | None
    policy_failures: int | None
    failures: dict[str, int]
    message: str | None
    owner: str | None
    created: float
    started: float | None
    finished: float | None


@dataclass(frozen=True)
class ResultRecord:
    run_id: str
    submission_id: str
    split: str
    episodes: int
    score: float | None
    policy_failures: int
    failures: dict[str, int]
    created: float


@dataclass(frozen=True)
class EventRecord:
    seq: int
    at: float
    run_id: str | None
    submission_id: str | None
    kind: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class Usage:
    episodes: int
    submissions: int


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so a reader sees the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def run_record(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        id=row["id"],
        task_id=row["task_id"],
        task_digest=row["task_digest"],
        task_json=row["task_json"],
        secret=bytes(row["secret"]),
        state=row["state"],
        created=row["created"],
        deadline=row["deadline"],
        budget=json.loads(row["budget_json"]),
        candidates=json.loads(row["candidates_json"]) if row["candidates_json"] else None,
        selected=row["selected"],
        selection_reason=row["selection_reason"],
        finalized=row["finalized"],
        error=row["error"],
        owner=row["owner"],
        reproducibility=json.loads(row["reproducibility_json"]),
        client=row["client"],
    )


def submission_record(row: sqlite3.Row) -> SubmissionRecord:
    return SubmissionRecord(
        run_id=row["run_id"],
        id=row["id"],
        ordinal=row["ordinal"],
        selector=row["selector"],
        indices=tuple(json.loads(row["indices_json"])),
        charged=row["charged"],
        program_digest=row["program_digest"],
        program=json.loads(row["program_json"]),
        state=row["state"],
        score=row["score"],
        policy_failures=row["policy_failures"],
        failures=json.loads(row["failures_json"]) if row["failures_json"] else {},
        message=row["message"],
        owner=row["owner"],
        created=row["created"],
        started=row["started"],
        finished=row["finished"],
    )


def result_record(row: sqlite3.Row) -> ResultRecord:
    return ResultRecord(
        run_id=row["run_id"],
        submission_id=row["submission_id"],
        split=row["split"],
        episodes=row["episodes"],
        score=row["score"],
        policy_failures=row["policy_failures"],
        failures=json.loads(row["failures_json"]),
        created=row["created"],
    )


def event_record(row: sqlite3.Row) -> EventRecord:
    return EventRecord(
        seq=row["seq"],
        at=row["at"],
        run_id=row["run_id"],
        submission_id=row["submission_id"],
        kind=row["kind"],
        detail=json.loads(row["detail_json"]),
    )
