"""One run, summarised for comparison: who played, how it was confined, what came out.

A :class:`RunSummary` is built from the records (:func:`summarize`) or read back
from an exported bundle (it is the bundle's ``runs`` table), so the leaderboard
treats runs of this machine and of others alike.

How a run is classed (``status``), so that nothing is silently mixed in:

- ``complete``: finalized, with an assessment score.
- ``failed``: the run ended without one (the agent never reached its run, left
  no complete submission, or judging failed); ``problem`` says which.
- ``interrupted``: the operator stopped the launcher before the agent ended.
- ``open``: still running, or left open by a process that died.

``confinement`` is ``confined`` or ``unconfined`` as the run's record states it,
and ``unknown`` when the record says nothing (runs started before confinement
was recorded, or without the launcher): unknown counts as not confined
(:func:`~evopolicy_mcp.host.reports.confinement_of`, which the runs table uses too).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from evopolicy_mcp.host.reports import confinement_of
from evopolicy_mcp.host.views import Confinement
from evopolicy_mcp.results.usage import read_usage
from evopolicy_mcp.store.database import Store
from evopolicy_mcp.store.records import EventRecord, RunRecord
from evopolicy_mcp.tasks.model import Task, task_family

__all__ = [
    "Confinement",
    "RunStatus",
    "RunSummary",
    "agent_label",
    "confinement_of",
    "summarize",
    "summarize_all",
]

RunStatus = Literal["complete", "failed", "interrupted", "open"]


class RunSummary(BaseModel):
    run_id: str
    task_id: str
    task_title: str
    family: str
    task_digest: str
    direction: Literal["maximize", "minimize"]
    baseline_score: float | None = Field(description="the task's stated baseline score")
    reference_score: float | None = Field(description="the task's stated reference score")
    agent: str | None = Field(description="the CLI (provider name); None without the launcher")
    model: str | None
    effort: str | None
    confinement: Confinement
    experiment: str | None = None
    state: str = Field(description="open, finalizing or finalized (the records' word)")
    status: RunStatus
    problem: str | None = Field(description="why a run is not complete, in one line")
    agent_reason: str | None = Field(description="how the agent's session ended (launcher runs)")
    fallback: bool = Field(description="the agent did not finalize; its best submissions were")
    submissions: int
    episodes_used: int
    episodes_budget: int
    submissions_budget: int
    best_public_score: float | None
    selected: str | None
    public_score: float | None = Field(description="public score of the selected submission")
    validation_score: float | None = Field(description="operator only: hidden validation")
    assessment_score: float | None = Field(description="operator only: held-out assessment")
    wall_seconds: float | None = Field(description="the agent's session, else start to finalize")
    input_tokens: int | None
    cached_input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    created: float
    finalized: float | None

    @property
    def normalised(self) -> float | None:
        """(assessment - baseline) / (reference - baseline): 0 the baseline, 1 the reference."""
        a, b, r = self.assessment_score, self.baseline_score, self.reference_score
        if a is None or b is None or r is None or r == b:
            return None
        return (a - b) / (r - b)


def agent_label(agent: str | None, model: str | None, effort: str | None) -> str:
    """``cli``, ``cli:model`` or ``cli:model:effort``; ``-`` for runs made without the launcher."""
    if agent is None:
        return "-"
    return ":".join([agent, model or "", effort or ""]).rstrip(":")


def _last(events: list[EventRecord], kind: str) -> dict[str, Any] | None:
    for event in reversed(events):
        if event.kind == kind:
            return event.detail
    return None


def _status(
    run: RunRecord, assessment: float | None, started: dict[str, Any] | None, ended: Any
) -> tuple[RunStatus, str | None]:
    reason = ended.get("reason") if isinstance(ended, dict) else None
    if run.state == "finalized" and assessment is not None:
        return "complete", None
    if reason == "interrupted":
        return "interrupted", "the operator interrupted the launcher"
    if reason == "failed_to_start":
        return "failed", f"the agent did not reach its run: {ended.get('message') or '-'}"[:200]
    if run.state == "finalized":
        return "failed", "finalized without an assessment score"
    if run.state == "finalizing":
        return "failed" if run.error else "open", run.error or "judging not finished"
    if started is not None and ended is not None:
        return "failed", "the agent left no complete submission to judge"
    if started is not None:
        return "open", "the agent's session has not ended (or its launcher died)"
    return "open", "the run was not finalized"


def summarize(store: Store, run_id: str, *, experiment: str | None = None) -> RunSummary | None:
    run = store.get_run(run_id)
    if run is None:
        return None
    task = Task.model_validate_json(run.task_json)
    events = store.events(run.id)
    subs = store.list_submissions(run.id)
    results = store.results(run.id)
    usage = store.usage(run.id)
    started = _last(events, "agent_started")
    ended = _last(events, "agent_ended")

    def result(split: str) -> float | None:
        return next(
            (r.score for r in results if r.submission_id == run.selected and r.split == split),
            None,
        )

    done = [s.score for s in subs if s.state == "complete" and s.score is not None]
    best = (max if task.score.direction == "maximize" else min)(done) if done else None
    assessment = result("test")
    status, problem = _status(run, assessment, started, ended)
    tokens = read_usage(store.run_dir(run.id) / "agent" / "stdout.jsonl") if started else None
    if ended is not None and isinstance(ended.get("seconds"), int | float):
        wall: float | None = float(ended["seconds"])
    else:
        wall = run.finalized - run.created if run.finalized else None
    return RunSummary(
        run_id=run.id,
        task_id=run.task_id,
        task_title=task.title,
        family=task_family(task),
        task_digest=run.task_digest,
        direction=task.score.direction,
        baseline_score=task.score.baseline_score,
        reference_score=task.score.reference_score,
        agent=started.get("agent") if started else None,
        model=started.get("model") if started else None,
        effort=started.get("effort") if started else None,
        confinement=confinement_of(run, events),
        experiment=experiment,
        state=run.state,
        status=status,
        problem=problem,
        agent_reason=ended.get("reason") if ended else None,
        fallback=_last(events, "fallback_candidates") is not None,
        submissions=usage.submissions,
        episodes_used=usage.episodes,
        episodes_budget=int(run.budget["episodes"]),
        submissions_budget=int(run.budget["submissions"]),
        best_public_score=best,
        selected=run.selected,
        public_score=next((s.score for s in subs if s.id == run.selected), None),
        validation_score=result("validation"),
        assessment_score=assessment,
        wall_seconds=wall,
        input_tokens=tokens.input_tokens if tokens else None,
        cached_input_tokens=tokens.cached_input_tokens if tokens else None,
        output_tokens=tokens.output_tokens if tokens else None,
        cost_usd=tokens.cost_usd if tokens else None,
        created=run.created,
        finalized=run.finalized,
    )


def summarize_all(
    store: Store, run_ids: list[str] | None = None, *, experiment: str | None = None
) -> list[RunSummary]:
    """Summaries of ``run_ids`` (default: every run), in the records' order."""
    ids = run_ids if run_ids is not None else [r.id for r in store.list_runs()]
    found = (summarize(store, rid, experiment=experiment) for rid in ids)
    return [s for s in found if s is not None]
