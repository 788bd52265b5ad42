"""Bounded storage of bulky feedback: a run's step traces and episode files (replays,
trajectories) within a cap.

Invariants:

- Only bulky feedback is ever evicted: the step traces inside a submission's
  ``feedback.json`` and the files under its ``artifacts/``. Scores, episode
  summaries, reports, programs, results and the database are never touched.
- The newest submission of a run keeps everything; older ones lose their bulky
  feedback oldest first, a whole submission at a time, until the run is within its cap.
- What was evicted is written beside the feedback (``evicted.json``) and as an event,
  so the agent is told plainly instead of finding a file missing.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from evopolicy_mcp.store.database import Store
from evopolicy_mcp.store.records import write_atomic

__all__ = ["EVICTED_FILE", "Evicted", "bulky_bytes", "evict", "evicted", "stored_bytes"]

EVICTED_FILE = "evicted.json"


@dataclass(frozen=True)
class Evicted:
    """What one submission lost: its traces (count) and files (names), in bytes."""

    submission_id: str
    traces: int
    files: tuple[str, ...]
    bytes: int


def _tree_bytes(root: Path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    return total


def stored_bytes(store: Store, run_id: str) -> int:
    """Bytes a run holds in its folder of the records (feedback, files, results)."""
    return _tree_bytes(store.run_dir(run_id))


def _traces_bytes(store: Store, run_id: str, submission_id: str) -> int:
    text = store.read_feedback(run_id, submission_id)
    if not text:
        return 0
    traces = json.loads(text).get("traces") or []
    return len(json.dumps(traces)) if traces else 0


def bulky_bytes(store: Store, run_id: str, submission_id: str) -> int:
    """Bytes of one submission's bulky feedback: its step traces and its episode files."""
    files = _tree_bytes(store.submission_dir(run_id, submission_id) / "artifacts")
    return files + _traces_bytes(store, run_id, submission_id)


def evicted(store: Store, run_id: str, submission_id: str) -> Evicted | None:
    """What was evicted of a submission, or None."""
    path = store.submission_dir(run_id, submission_id) / EVICTED_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return Evicted(submission_id, data["traces"], tuple(data["files"]), data["bytes"])


def _evict_one(store: Store, run_id: str, submission_id: str) -> Evicted:
    sub_dir = store.submission_dir(run_id, submission_id)
    files = tuple(store.list_artifacts(run_id, submission_id))
    size = _tree_bytes(sub_dir / "artifacts")
    traces = 0
    text = store.read_feedback(run_id, submission_id)
    if text:
        feedback = json.loads(text)
        traces = len(feedback.get("traces") or [])
        if traces:
            size += len(json.dumps(feedback["traces"]))
            feedback["traces"] = []
            write_atomic(store.feedback_path(run_id, submission_id), json.dumps(feedback).encode())
    # The record of what went is written before the files go: a crash in between leaves
    # files the next eviction removes, never a missing file nobody explains.
    done = Evicted(submission_id, traces, files, size)
    write_atomic(
        sub_dir / EVICTED_FILE,
        json.dumps({"traces": traces, "files": list(files), "bytes": size}).encode(),
    )
    shutil.rmtree(sub_dir / "artifacts", ignore_errors=True)
    store.add_event(
        run_id,
        "feedback_evicted",
        {"traces": traces, "files": len(files), "bytes": size},
        submission_id=submission_id,
    )
    return done


def evict(store: Store, run_id: str, cap_bytes: int) -> list[Evicted]:
    """Evict the oldest submissions' bulky feedback until the run's bulky bytes are within
    ``cap_bytes``; the newest submission and unfinished ones keep theirs."""
    subs = store.list_submissions(run_id)
    if len(subs) < 2:
        return []
    newest = subs[-1].id
    sizes = {s.id: bulky_bytes(store, run_id, s.id) for s in subs}
    total = sum(sizes.values())
    out: list[Evicted] = []
    for sub in subs:
        if total <= cap_bytes:
            break
        if sub.id == newest or sub.state != "complete" or sizes[sub.id] == 0:
            continue
        done = _evict_one(store, run_id, sub.id)
        total -= sizes[sub.id]
        out.append(done)
    return out
