"""Judging a launched run once its agent's session is over.

A host opened on the data directory takes over whatever no live server holds
(submissions still evaluating, a finalize under way) and waits for the rest. If
the agent never finalized, its best complete submissions by public score become
the candidates (recorded as ``fallback``); with none, the run stays open. A run
on a server its sweep shares is finalized through that server (with the run's
own token), so that server judges it on its executor, beside the other runs;
only if that server is gone does the launcher's own host judge it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from evopolicy_mcp.host.authority import Host, HostError
from evopolicy_mcp.host.selection import CandidateScore, fallback_candidates
from evopolicy_mcp.kernel.sandbox import Isolation
from evopolicy_mcp.store.database import PENDING, Store, StoreError
from evopolicy_mcp.tasks.model import Task

from .client import finalize_over
from .endpoint import SharedRun
from .outcome import AgentOptions, AgentOutcome
from .procs import signals_interrupt

__all__ = ["JUDGE_FAULTS", "judge", "judge_run", "open_host"]

JUDGE_FAULTS = (HostError, StoreError, OSError, sqlite3.Error)


def open_host(
    opts: AgentOptions,
    data_dir: Path,
    bind: tuple[str, str] | None,
    resume: bool | str,
    *,
    episodes: bool = True,
) -> Host:
    """A host on the launcher's side; it runs episodes (judging what no server holds)
    where the run's server does, unless ``episodes`` is False (it only prepares)."""
    return Host(
        data_dir,
        tasks_dirs=opts.tasks_dirs,
        seed=opts.seed,
        bind=bind,
        workers=opts.workers,
        executor=opts.executor if episodes else "thread",
        ray_address=opts.ray_address if episodes else None,
        isolation=Isolation(strict=opts.isolation == "strict"),
        resume=resume,
        trace_all=opts.trace_all,
        trace_steps=opts.trace_steps,
        finish=opts.finish,
        storage_mb=opts.storage_mb,
    )


def _fallback(store: Store, run_id: str) -> list[str]:
    """Candidates for a run its agent left open (rule: :func:`fallback_candidates`)."""
    run = store.get_run(run_id)
    assert run is not None
    task = Task.model_validate_json(run.task_json)  # the task as the run started
    done = [
        (CandidateScore(s.id, s.score, s.policy_failures or 0), s.program_digest)
        for s in store.list_submissions(run_id)
        if s.state == "complete"
    ]
    return fallback_candidates(done, task.score.direction, task.validation.candidates)


def _finalized_by(shared: SharedRun | None, host: Host, run_id: str, candidates: list[str]) -> bool:
    """Finalize through the shared server, which then judges the run; False when there
    is none, or it is gone, or it did not take the candidates."""
    if shared is None or not shared.alive():
        return False
    if finalize_over(shared.bind(), run_id, candidates) is None:
        return True
    run = host.store.get_run(run_id)
    return run is not None and run.state != "open"  # taken, though the answer was lost


def judge(
    opts: AgentOptions, data_dir: Path, outcome: AgentOutcome, shared: SharedRun | None = None
) -> None:
    run_id = outcome.run_id
    with open_host(opts, data_dir, None, resume=run_id) as host:  # what the server left
        for sub in host.store.list_submissions(run_id):
            if sub.state in PENDING:
                host.wait(run_id, sub.id, opts.judge_timeout)
        run = host.store.get_run(run_id)
        assert run is not None
        if run.state == "open":
            candidates = _fallback(host.store, run_id)
            if not candidates:
                outcome.message = (
                    outcome.message or "no complete submission to judge; the run stays open"
                )
                return
            if not _finalized_by(shared, host, run_id, candidates):
                host.finalize(run_id, candidates)
            host.store.add_event(run_id, "fallback_candidates", {"candidates": candidates})
            outcome.fallback = True
        host.finish(run_id, opts.judge_timeout)
        report = host.report(run_id)
    outcome.run_state = report.state
    outcome.candidates = list(report.candidates)
    outcome.selected = report.selected
    for row in report.validation:
        if row.submission_id == report.selected:
            outcome.validation_score = row.score
    if report.assessment is not None:
        outcome.test_score = report.assessment.score


def judge_run(opts: AgentOptions, run_id: str) -> AgentOutcome:
    """Judge a run whose agent session ended but whose launcher did not finish judging
    it (a sweep resuming after a kill): the same steps as at the end of ``run_agent``."""
    data_dir = opts.data_dir.expanduser().resolve()
    store = Store(data_dir, create=False)
    try:
        events = store.events(run_id)
    finally:
        store.close()
    started = next((e.detail for e in events if e.kind == "agent_started"), {})
    ended = next((e.detail for e in reversed(events) if e.kind == "agent_ended"), {})
    outcome = AgentOutcome(
        run_id=run_id,
        agent=opts.agent,
        reason=str(ended.get("reason", "exited")),
        workspace=Path(started.get("workspace", "")),
        exit_code=ended.get("exit_code"),
        seconds=float(ended.get("seconds", 0.0)),
    )
    with signals_interrupt():
        try:
            judge(opts, data_dir, outcome)
        except JUDGE_FAULTS as exc:
            outcome.message = f"judging stopped: {getattr(exc, 'message', None) or exc}"
    return outcome
