"""Admission checks: everything that may refuse a submission or a finalize before
anything is charged or closed.

Invariant: a rejected call and a program that fails to capture cost nothing.
These checks run before the store's one charging transaction (which repeats
the budget checks atomically); their messages say what to do and reveal
nothing private: budget numbers are public, the only path ever named is the
one the agent gave.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from evopolicy_mcp.evaluation import snapshot
from evopolicy_mcp.host.errors import HostError
from evopolicy_mcp.host.program_root import ProgramRoot
from evopolicy_mcp.store.database import Rejected, stranding
from evopolicy_mcp.store.records import RunRecord
from evopolicy_mcp.tasks.model import Task

__all__ = [
    "capture_program",
    "check_budget",
    "check_candidates",
    "check_open",
    "candidate_rejection",
    "rejection",
]

_CANDIDATE_PROBLEMS = {
    "unknown": "is not a submission of this run (run_status lists them)",
    "reserved": "is still running; wait for it with get_feedback, then finalize",
    "evaluating": "is still running; wait for it with get_feedback, then finalize",
    "refunded": "failed on the host side and has no score; leave it out",
}


def rejection(rejected: Rejected, task: Task) -> HostError:
    """The agent's message for a refusal of the store's budget transaction."""
    b, info = task.budget, rejected.info
    messages = {
        "unknown_run": "no such run; start one with start_run(task_id)",
        "run_closed": "the run was closed by finalize; it takes no more submissions",
        "time_up": (
            f"the run's wall time ({b.wall_seconds or 0:g} s) is over: no more submissions; "
            "call finalize with your best submission ids"
        ),
        "submission_limit": (
            f"all {b.submissions} submissions of this run are used; call finalize with "
            "your best submission ids"
        ),
        "over_cap": (
            f"this selector has {info.get('requested')} episodes but one submission may "
            f"have at most {b.per_submission}; select fewer indices"
        ),
        "over_budget": (
            f"this selector has {info.get('requested')} episodes but only "
            f"{info.get('remaining')} of the run's {b.episodes} remain; select at most "
            f"{info.get('remaining')} indices, or finalize"
        ),
        "would_strand_budget": (
            f"this run must spend all {b.episodes} episodes (finish = exhaust): after this "
            f"selector's {info.get('requested')} episodes, {info.get('left')} would remain for "
            f"{info.get('submissions')} submission(s) of at most {b.per_submission}; select at "
            f"least {info.get('least')} indices"
        ),
    }
    return HostError(rejected.code, messages.get(rejected.code, rejected.code))


def check_open(run: RunRecord, task: Task) -> None:
    if run.state != "open":
        raise HostError(
            "run_closed",
            f"run {run.id} was closed by finalize; it takes no more submissions "
            "(start_run starts a new run if this server allows it)",
        )
    if run.deadline is not None and time.time() > run.deadline:
        raise rejection(Rejected("time_up"), task)


def check_budget(task: Task, used: int, count: int, requested: int) -> None:
    """An early look at the budget, so a doomed submission is not even captured."""
    b = task.budget
    if count >= b.submissions:
        raise rejection(Rejected("submission_limit"), task)
    if requested > b.per_submission:
        raise rejection(Rejected("over_cap", requested=requested), task)
    if used + requested > b.episodes:
        raise rejection(
            Rejected("over_budget", requested=requested, remaining=b.episodes - used), task
        )
    if b.finish == "exhaust":
        stranded = stranding(b.episodes, b.submissions, b.per_submission, used, count, requested)
        if stranded is not None:
            raise rejection(stranded, task)


def capture_program(
    files: dict[str, str] | None,
    program_dir: str | None,
    *,
    programs_dir: Path,
    root: ProgramRoot,
) -> snapshot.Program:
    """Snapshot the program given inline or as a directory, or raise ``program_invalid``.
    A directory is opened once under ``root`` and copied through that descriptor."""
    if (files is None) == (program_dir is None):
        raise HostError(
            "program_invalid",
            "give the program either inline as files={'policy.py': ...} or as "
            "program_dir='/path/to/dir', exactly one of the two",
        )
    try:
        if files is not None:
            return snapshot.capture_files(files, programs_dir)
        assert program_dir is not None
        fd = root.open(program_dir)
        try:
            return snapshot.capture(fd, programs_dir, exclude=root.records)
        finally:
            os.close(fd)
    except snapshot.ProgramError as exc:
        raise HostError("program_invalid", str(exc)) from None


def check_candidates(run: RunRecord, task: Task, candidates: list[str]) -> None:
    """The checks of a finalize request that need no records (the store does the rest)."""
    if run.state != "open":
        raise HostError(
            "run_closed", f"run {run.id} is already finalized; nothing more to hand over"
        )
    limit = task.validation.candidates
    if not isinstance(candidates, list) or not candidates:
        raise HostError("bad_candidates", f"give 1 to {limit} submission ids, best first")
    if len(candidates) > limit:
        raise HostError(
            "bad_candidates",
            f"{len(candidates)} candidates given; this task takes at most {limit}; "
            "keep your best ones; the run stays open",
        )
    seen: set[str] = set()
    for cid in candidates:
        if not isinstance(cid, str):
            raise HostError("bad_candidates", "candidates are submission ids (strings like 's3')")
        if cid in seen:
            raise HostError(
                "bad_candidates", f"{cid!r} is listed twice; list each id once; the run stays open"
            )
        seen.add(cid)


def candidate_rejection(run: RunRecord, rejected: Rejected) -> HostError:
    if rejected.code == "run_closed":
        return HostError("run_closed", f"run {run.id} is already finalized")
    if rejected.code == "budget_left":
        return HostError(
            "budget_left",
            f"this run must spend its whole budget before finalize (finish = exhaust): "
            f"{rejected.info.get('left')} episodes remain; submit them, then finalize "
            "(the run stays open)",
        )
    cid, problem = rejected.info.get("submission_id"), rejected.info.get("problem")
    why = _CANDIDATE_PROBLEMS.get(str(problem), "cannot be a candidate")
    return HostError("bad_candidates", f"{cid!r} {why}; the run stays open")
