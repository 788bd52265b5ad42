"""Run records: SQLite (WAL) plus files beside it, in one data directory.

Layout of a data directory::

    evopolicy.sqlite3          runs, submissions, events, results, schema version
    programs/<digest>/         immutable program snapshots (written by snapshot)
    runs/<run>/submissions/<id>/feedback.json    committed public feedback
    runs/<run>/submissions/<id>/artifacts/...    files a submission produced
    runs/<run>/validation/<id>.json              hidden results (operator only)
    runs/<run>/test/<id>.json
    instances/<id>.lock        held (flock) by each live host using this directory

Invariants enforced here:

- Budget reservation is one ``BEGIN IMMEDIATE`` transaction that checks the
  run is open and in time, the submission count, the per-submission cap and
  episodes used + requested <= budget before inserting, so concurrent calls,
  in this process or another, can never overspend.
- A submission is charged once, when reserved. Re-running it after a crash
  does not charge again; a refund (host fault) releases the charge.
- Files are written atomically (temporary file, fsync, rename) before the row
  that points at them commits, so a committed row always has its file.
- Events are append-only (triggers refuse UPDATE and DELETE).
- Work in progress carries the id of the host instance doing it. A host that
  dies releases its instance lock, which is how a restarted host knows which
  work it may take over without racing a live one.

This module is a leaf: it imports nothing from the rest of the package but its
record types (:mod:`evopolicy_mcp.store.records`) and host instances
(:mod:`evopolicy_mcp.store.instances`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evopolicy_mcp.store.instances import Instances
from evopolicy_mcp.store.records import (
    SCHEMA,
    EventRecord,
    Rejected,
    ResultRecord,
    RunRecord,
    StoreError,
    SubmissionRecord,
    Usage,
    event_record,
    result_record,
    run_record,
    stranding,
    submission_record,
    write_atomic,
)

__all__ = [
    "DB_NAME",
    "PENDING",
    "SCHEMA_VERSION",
    "EventRecord",
    "Rejected",
    "stranding",
    "ResultRecord",
    "RunRecord",
    "Store",
    "StoreError",
    "SubmissionRecord",
    "Usage",
    "default_data_dir",
    "write_atomic",
]

SCHEMA_VERSION = 2  # 2: runs.client
DB_NAME = "evopolicy.sqlite3"
PENDING = ("reserved", "evaluating")


def default_data_dir() -> Path:
    """``EVOPOLICY_DATA_DIR``, else ``$XDG_DATA_HOME/evopolicy-mcp``, else
    ``~/.local/share/evopolicy-mcp``."""
    env = os.environ.get("EVOPOLICY_DATA_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "evopolicy-mcp"


class Store:
    """The records of one data directory. Thread-safe: one connection behind a lock."""

    def __init__(self, data_dir: Path, *, create: bool = True) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.db_path = self.data_dir / DB_NAME
        if not create and not self.db_path.exists():
            raise StoreError(f"no records in {self.data_dir}")
        # Records hold run secrets: keep the directory private to this user.
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.programs_dir = self.data_dir / "programs"
        self.programs_dir.mkdir(exist_ok=True)
        self._lock = threading.RLock()
        self._instances = Instances(self.data_dir)
        try:
            db = sqlite3.connect(
                self.db_path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open records {self.db_path}: {exc}") from exc
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode loses nothing when the process dies (kill -9); only an
        # OS crash could drop the last commits.
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=ON")
        db.execute("PRAGMA busy_timeout=30000")
        self._db: sqlite3.Connection | None = db
        self._migrate()

    # ------------------------------------------------------------ plumbing

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError("the records are closed")
        return self._db

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            db = self.db
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _migrate(self) -> None:
        with self._write() as db:
            has = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_version'"
            ).fetchone()
            if not has:
                for statement in SCHEMA.split(";\n"):
                    if statement.strip():
                        db.execute(statement)
                db.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
                return
            version = db.execute("SELECT version FROM schema_version").fetchone()[0]
            if version == 1:
                db.execute("ALTER TABLE runs ADD COLUMN client TEXT")
                db.execute("UPDATE schema_version SET version=2")
                version = 2
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"records in {self.data_dir} use schema {version}, newer than this "
                    f"evopolicy-mcp understands ({SCHEMA_VERSION}); upgrade evopolicy-mcp"
                )

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
            self._instances.release()

    def _event(
        self,
        db: sqlite3.Connection,
        run_id: str | None,
        submission_id: str | None,
        kind: str,
        detail: dict[str, Any] | None = None,
    ) -> None:
        db.execute(
            "INSERT INTO events (at, run_id, submission_id, kind, detail_json) VALUES (?,?,?,?,?)",
            (time.time(), run_id, submission_id, kind, json.dumps(detail or {})),
        )

    def add_event(
        self,
        run_id: str | None,
        kind: str,
        detail: dict[str, Any] | None = None,
        *,
        submission_id: str | None = None,
    ) -> None:
        with self._write() as db:
            self._event(db, run_id, submission_id, kind, detail)

    # ------------------------------------------------------------ host instances

    @property
    def instance(self) -> str | None:
        """This host's instance id, once :meth:`acquire_instance` has registered it."""
        return self._instances.id

    def acquire_instance(self) -> str:
        """Register this process's host; held until :meth:`close` or process death."""
        with self._lock:
            return self._instances.acquire()

    def instance_alive(self, instance: str | None) -> bool:
        with self._lock:
            return self._instances.alive(instance)

    def claim_orphans(
        self, run_id: str | None = None, *, runs: bool = True
    ) -> tuple[list[SubmissionRecord], list[RunRecord]]:
        """Take over pending submissions and finalizing runs whose host died or that no
        host holds (of one run, if ``run_id`` is given; no runs if not ``runs``)."""
        me = self.acquire_instance()
        with self._write() as db:
            subs = [
                submission_record(r)
                for r in db.execute(
                    "SELECT * FROM submissions WHERE state IN ('reserved', 'evaluating') "
                    "ORDER BY created"
                )
            ]
            finalizing = [
                run_record(r) for r in db.execute("SELECT * FROM runs WHERE state='finalizing'")
            ]
            if run_id is not None:
                subs = [s for s in subs if s.run_id == run_id]
                finalizing = [r for r in finalizing if r.id == run_id]
            claimed_subs = [s for s in subs if not self.instance_alive(s.owner)]
            claimed_runs = [r for r in finalizing if runs and not self.instance_alive(r.owner)]
            for s in claimed_subs:
                db.execute(
                    "UPDATE submissions SET owner=? WHERE run_id=? AND id=?", (me, s.run_id, s.id)
                )
                self._event(db, s.run_id, s.id, "submission_resumed", {"previous_owner": s.owner})
            for r in claimed_runs:
                db.execute("UPDATE runs SET owner=? WHERE id=?", (me, r.id))
                self._event(db, r.id, None, "finalize_resumed", {"previous_owner": r.owner})
        return claimed_subs, claimed_runs

    # ------------------------------------------------------------ runs

    def create_run(
        self,
        run_id: str,
        *,
        task_id: str,
        task_digest: str,
        task_json: str,
        secret: bytes,
        budget: dict[str, Any],
        deadline: float | None,
        reproducibility: dict[str, Any],
        client: str | None = None,
    ) -> RunRecord:
        with self._write() as db:
            if db.execute("SELECT 1 FROM runs WHERE id=?", (run_id,)).fetchone():
                raise Rejected("run_exists", run_id=run_id)
            db.execute(
                "INSERT INTO runs (id, task_id, task_digest, task_json, secret, state, created, "
                "deadline, budget_json, reproducibility_json, client) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    task_id,
                    task_digest,
                    task_json,
                    secret,
                    "open",
                    time.time(),
                    deadline,
                    json.dumps(budget),
                    json.dumps(reproducibility),
                    client,
                ),
            )
            self._event(db, run_id, None, "run_started", {"task_id": task_id, "budget": budget})
        run = self.get_run(run_id)
        assert run is not None
        return run

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._lock:
            row = self.db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        return run_record(row) if row else None

    def list_runs(self) -> list[RunRecord]:
        with self._lock:
            rows = self.db.execute("SELECT * FROM runs ORDER BY created, id").fetchall()
        return [run_record(r) for r in rows]

    def usage(self, run_id: str) -> Usage:
        with self._lock:
            return self._usage(self.db, run_id)

    @staticmethod
    def _usage(db: sqlite3.Connection, run_id: str) -> Usage:
        episodes, count = db.execute(
            "SELECT COALESCE(SUM(charged), 0), COUNT(*) FROM submissions "
            "WHERE run_id=? AND state != 'refunded'",
            (run_id,),
        ).fetchone()
        return Usage(episodes=episodes, submissions=count)

    @classmethod
    def _unspent(cls, db: sqlite3.Connection, run: RunRecord, now: float) -> int:
        """Episodes a ``finish = exhaust`` run must still spend before finalize: 0 when the
        rule is ``early``, the budget is spent, or no submission or time is left to spend it."""
        budget = run.budget
        if budget.get("finish") != "exhaust":
            return 0
        if run.deadline is not None and now > run.deadline:
            return 0
        used = cls._usage(db, run.id)
        if used.submissions >= budget["submissions"]:
            return 0
        return max(0, budget["episodes"] - used.episodes)

    # ------------------------------------------------------------ submissions

    def reserve(
        self,
        run_id: str,
        *,
        selector: str,
        indices: list[int],
        program: dict[str, Any],
        now: float | None = None,
    ) -> SubmissionRecord:
        """Admit one submission and charge its episodes, or raise :class:`Rejected`."""
        owner = self.acquire_instance()
        now = time.time() if now is None else now
        requested = len(indices)
        with self._write() as db:
            row = db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
            if row is None:
                raise Rejected("unknown_run", run_id=run_id)
            run = run_record(row)
            if run.state != "open":
                raise Rejected("run_closed", state=run.state)
            if run.deadline is not None and now > run.deadline:
                raise Rejected("time_up", deadline=run.deadline)
            budget = run.budget
            used = self._usage(db, run_id)
            if used.submissions >= budget["submissions"]:
                raise Rejected("submission_limit", limit=budget["submissions"])
            if requested > budget["per_submission"]:
                raise Rejected("over_cap", cap=budget["per_submission"], requested=requested)
            if used.episodes + requested > budget["episodes"]:
                raise Rejected(
                    "over_budget",
                    requested=requested,
                    remaining=budget["episodes"] - used.episodes,
                    budget=budget["episodes"],
                )
            if budget.get("finish") == "exhaust":
                stranded = stranding(
                    budget["episodes"],
                    budget["submissions"],
                    budget["per_submission"],
                    used.episodes,
                    used.submissions,
                    requested,
                )
                if stranded is not None:
                    raise stranded
            ordinal = (
                db.execute(
                    "SELECT COALESCE(MAX(ordinal), 0) FROM submissions WHERE run_id=?", (run_id,)
                ).fetchone()[0]
                + 1
            )
            sub_id = f"s{ordinal}"
            db.execute(
                "INSERT INTO submissions (run_id, id, ordinal, selector, indices_json, charged, "
                "program_digest, program_json, state, owner, created) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    sub_id,
                    ordinal,
                    selector,
                    json.dumps(indices),
                    requested,
                    program["digest"],
                    json.dumps(program),
                    "reserved",
                    owner,
                    now,
                ),
            )
            self._event(
                db,
                run_id,
                sub_id,
                "submission_reserved",
                {"selector": selector, "charged": requested, "program": program["digest"]},
            )
            record = db.execute(
                "SELECT * FROM submissions WHERE run_id=? AND id=?", (run_id, sub_id)
            ).fetchone()
        return submission_record(record)

    def get_submission(self, run_id: str, submission_id: str) -> SubmissionRecord | None:
        with self._lock:
            row = self.db.execute(
                "SELECT * FROM submissions WHERE run_id=? AND id=?", (run_id, submission_id)
            ).fetchone()
        return submission_record(row) if row else None

    def list_submissions(self, run_id: str) -> list[SubmissionRecord]:
        with self._lock:
            rows = self.db.execute(
                "SELECT * FROM submissions WHERE run_id=? ORDER BY ordinal", (run_id,)
            ).fetchall()
        return [submission_record(r) for r in rows]

    def mark_evaluating(self, run_id: str, submission_id: str) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE submissions SET state='evaluating', started=? "
                "WHERE run_id=? AND id=? AND state IN ('reserved', 'evaluating')",
                (time.time(), run_id, submission_id),
            )
            self._event(db, run_id, submission_id, "evaluation_started")

    def complete_submission(
        self,
        run_id: str,
        submission_id: str,
        *,
        score: float | None,
        policy_failures: int,
        failures: dict[str, int],
        feedback_json: str,
    ) -> bool:
        """Commit feedback (file first, then the row). False if it was already settled."""
        write_atomic(self.feedback_path(run_id, submission_id), feedback_json.encode())
        with self._write() as db:
            cur = db.execute(
                "UPDATE submissions SET state='complete', score=?, policy_failures=?, "
                "failures_json=?, finished=? "
                "WHERE run_id=? AND id=? AND state IN ('reserved', 'evaluating')",
                (score, policy_failures, json.dumps(failures), time.time(), run_id, submission_id),
            )
            if cur.rowcount:
                self._event(
                    db,
                    run_id,
                    submission_id,
                    "submission_complete",
                    {"score": score, "policy_failures": policy_failures},
                )
        return bool(cur.rowcount)

    def refund_submission(
        self, run_id: str, submission_id: str, *, message: str, detail: str
    ) -> bool:
        """Release the charge of a submission the host could not evaluate."""
        with self._write() as db:
            cur = db.execute(
                "UPDATE submissions SET state='refunded', message=?, finished=? "
                "WHERE run_id=? AND id=? AND state IN ('reserved', 'evaluating')",
                (message, time.time(), run_id, submission_id),
            )
            if cur.rowcount:
                self._event(db, run_id, submission_id, "submission_refunded", {"error": detail})
        return bool(cur.rowcount)

    # ------------------------------------------------------------ finalize

    def begin_finalize(self, run_id: str, candidates: list[str], *, own: bool = True) -> RunRecord:
        """Close the run to the agent, atomically with checking its candidates. Unless
        ``own``, no host holds its judging yet: the first to claim it judges it."""
        owner = self.acquire_instance() if own else None
        with self._write() as db:
            row = db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
            if row is None:
                raise Rejected("unknown_run", run_id=run_id)
            if row["state"] != "open":
                raise Rejected("run_closed", state=row["state"])
            left = self._unspent(db, run_record(row), time.time())
            if left:
                raise Rejected("budget_left", left=left)
            for cid in candidates:
                sub = db.execute(
                    "SELECT state FROM submissions WHERE run_id=? AND id=?", (run_id, cid)
                ).fetchone()
                if sub is None:
                    raise Rejected("bad_candidates", problem="unknown", submission_id=cid)
                if sub["state"] != "complete":
                    raise Rejected("bad_candidates", problem=sub["state"], submission_id=cid)
            db.execute(
                "UPDATE runs SET state='finalizing', candidates_json=?, owner=? WHERE id=?",
                (json.dumps(candidates), owner, run_id),
            )
            self._event(db, run_id, None, "finalize_started", {"candidates": candidates})
            closed = db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        return run_record(closed)

    def save_result(
        self,
        run_id: str,
        submission_id: str,
        split: str,
        *,
        episodes: int,
        score: float | None,
        policy_failures: int,
        failures: dict[str, int],
        feedback_json: str,
    ) -> None:
        write_atomic(self.result_path(run_id, split, submission_id), feedback_json.encode())
        with self._write() as db:
            db.execute(
                "INSERT OR REPLACE INTO results (run_id, submission_id, split, episodes, score, "
                "policy_failures, failures_json, created) VALUES (?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    submission_id,
                    split,
                    episodes,
                    score,
                    policy_failures,
                    json.dumps(failures),
                    time.time(),
                ),
            )
            self._event(
                db,
                run_id,
                submission_id,
                f"{split}_result",
                {"score": score, "policy_failures": policy_failures},
            )

    def results(self, run_id: str) -> list[ResultRecord]:
        with self._lock:
            rows = self.db.execute(
                "SELECT * FROM results WHERE run_id=? ORDER BY created", (run_id,)
            ).fetchall()
        return [result_record(r) for r in rows]

    def set_run_error(self, run_id: str, error: str) -> None:
        with self._write() as db:
            db.execute("UPDATE runs SET error=? WHERE id=?", (error, run_id))
            self._event(db, run_id, None, "finalize_error", {"error": error})

    def complete_finalize(self, run_id: str, *, selected: str, reason: str) -> bool:
        with self._write() as db:
            cur = db.execute(
                "UPDATE runs SET state='finalized', selected=?, selection_reason=?, finalized=?, "
                "error=NULL WHERE id=? AND state='finalizing'",
                (selected, reason, time.time(), run_id),
            )
            if cur.rowcount:
                self._event(db, run_id, selected, "run_finalized", {"reason": reason})
        return bool(cur.rowcount)

    # ------------------------------------------------------------ events and files

    def events(self, run_id: str) -> list[EventRecord]:
        with self._lock:
            rows = self.db.execute(
                "SELECT * FROM events WHERE run_id=? ORDER BY seq", (run_id,)
            ).fetchall()
        return [event_record(r) for r in rows]

    def run_dir(self, run_id: str) -> Path:
        return self.data_dir / "runs" / run_id

    def submission_dir(self, run_id: str, submission_id: str) -> Path:
        return self.run_dir(run_id) / "submissions" / submission_id

    def feedback_path(self, run_id: str, submission_id: str) -> Path:
        return self.submission_dir(run_id, submission_id) / "feedback.json"

    def result_path(self, run_id: str, split: str, submission_id: str) -> Path:
        return self.run_dir(run_id) / split / f"{submission_id}.json"

    def read_feedback(self, run_id: str, submission_id: str) -> str | None:
        try:
            return self.feedback_path(run_id, submission_id).read_text()
        except FileNotFoundError:
            return None

    def write_artifact(self, run_id: str, submission_id: str, name: str, data: bytes) -> None:
        write_atomic(self._artifact_path(run_id, submission_id, name), data)

    def list_artifacts(self, run_id: str, submission_id: str) -> list[str]:
        root = self.submission_dir(run_id, submission_id) / "artifacts"
        if not root.is_dir():
            return []
        return sorted(
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file() and not p.name.startswith(".")
        )

    def read_artifact(self, run_id: str, submission_id: str, name: str) -> bytes | None:
        try:
            return self._artifact_path(run_id, submission_id, name).read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return None

    def _artifact_path(self, run_id: str, submission_id: str, name: str) -> Path:
        parts = Path(name).parts
        if not parts or Path(name).is_absolute() or any(p in ("..", ".") for p in parts):
            raise ValueError(f"artifact name {name!r} must be a plain relative path")
        return self.submission_dir(run_id, submission_id) / "artifacts" / Path(*parts)
