"""The leaderboard: runs grouped by task and agent, repeats summarised with intervals.

A row is one task, one agent (CLI, model, effort) and one confinement class.
Confined runs and the others (unconfined, or unknown because the record does
not say) never share a row, so an unconfined run cannot lift a confined
agent's mean; those rows are marked. Means are over the row's ``complete`` runs
only (finalized, with an assessment score); its failed, interrupted and open
runs are counted beside them, never averaged in.

Per row: the assessment score's mean with a 95% t interval over repeats, the
public, validation and assessment means of the selected programs and the
public - assessment gap, episodes used, wall time, tokens and cost where the
CLI reported them, and the normalised score ``(assessment - baseline) /
(reference - baseline)`` when the task states both numbers.

A family row is one family, one agent, one confinement class: the mean of the
normalised task means over the family's tasks that state a reference (each
task weighs the same, however many repeats it has).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel

from evopolicy_mcp.results.stats import mean_interval
from evopolicy_mcp.results.summary import RunSummary, agent_label

__all__ = ["FamilyRow", "Leaderboard", "TaskRow", "build_leaderboard"]


class TaskRow(BaseModel):
    task_id: str
    family: str
    agent: str
    cli: str | None
    model: str | None
    effort: str | None
    confined: bool
    direction: str
    runs: int
    complete: int
    failed: int
    interrupted: int
    open: int
    fallback: int
    assessment_mean: float | None
    assessment_low: float | None
    assessment_high: float | None
    assessment_stdev: float | None
    public_mean: float | None
    validation_mean: float | None
    gap_public_assessment: float | None
    normalised_mean: float | None
    episodes_used_mean: float | None
    episodes_budget: int
    wall_seconds_mean: float | None
    input_tokens_mean: float | None
    output_tokens_mean: float | None
    cost_usd_mean: float | None
    run_ids: list[str]


class FamilyRow(BaseModel):
    family: str
    agent: str
    confined: bool
    tasks: int  # tasks of the family this agent has complete runs on
    normalised_tasks: int  # of those, the ones stating a baseline and a reference
    normalised_mean: float | None
    task_ids: list[str]


class Leaderboard(BaseModel):
    tasks: list[TaskRow]
    families: list[FamilyRow]
    runs: int
    note: str = (
        "means over complete runs only; confined and other runs never share a row; "
        "normalised = (assessment - baseline) / (reference - baseline)"
    )


def _mean(values: Iterable[float | int | None]) -> float | None:
    present = [float(v) for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _of(runs: list[RunSummary], get: Callable[[RunSummary], Any]) -> float | None:
    return _mean(get(r) for r in runs)


def _task_row(key: tuple[str, str, bool], runs: list[RunSummary]) -> TaskRow:
    task_id, label, confined = key
    first = runs[0]
    done = [r for r in runs if r.status == "complete"]
    scores = [r.assessment_score for r in done if r.assessment_score is not None]
    interval = mean_interval(scores)
    gaps = [
        r.public_score - r.assessment_score
        for r in done
        if r.public_score is not None and r.assessment_score is not None
    ]

    def count(status: str) -> int:
        return sum(r.status == status for r in runs)

    return TaskRow(
        task_id=task_id,
        family=first.family,
        agent=label,
        cli=first.agent,
        model=first.model,
        effort=first.effort,
        confined=confined,
        direction=first.direction,
        runs=len(runs),
        complete=len(done),
        failed=count("failed"),
        interrupted=count("interrupted"),
        open=count("open"),
        fallback=sum(r.fallback for r in done),
        assessment_mean=interval.mean,
        assessment_low=interval.low,
        assessment_high=interval.high,
        assessment_stdev=interval.stdev,
        public_mean=_of(done, lambda r: r.public_score),
        validation_mean=_of(done, lambda r: r.validation_score),
        gap_public_assessment=_mean(gaps),
        normalised_mean=_of(done, lambda r: r.normalised),
        episodes_used_mean=_of(done, lambda r: r.episodes_used),
        episodes_budget=max(r.episodes_budget for r in runs),
        wall_seconds_mean=_of(done, lambda r: r.wall_seconds),
        input_tokens_mean=_of(done, lambda r: r.input_tokens),
        output_tokens_mean=_of(done, lambda r: r.output_tokens),
        cost_usd_mean=_of(done, lambda r: r.cost_usd),
        run_ids=[r.run_id for r in runs],
    )


def build_leaderboard(
    runs: Iterable[RunSummary], *, task: str | None = None, family: str | None = None
) -> Leaderboard:
    """Rows for ``runs`` (optionally of one task or one family), sorted by task, then
    confined rows first, then best assessment mean first."""
    chosen = [
        r
        for r in runs
        if (task is None or r.task_id == task) and (family is None or r.family == family)
    ]
    groups: dict[tuple[str, str, bool], list[RunSummary]] = {}
    for r in chosen:
        key = (r.task_id, agent_label(r.agent, r.model, r.effort), r.confinement == "confined")
        groups.setdefault(key, []).append(r)
    rows = [_task_row(key, group) for key, group in groups.items()]

    def order(row: TaskRow) -> tuple[Any, ...]:
        sign = -1 if row.direction == "maximize" else 1
        mean = row.assessment_mean
        return (row.task_id, not row.confined, mean is None, sign * (mean or 0.0), row.agent)

    rows.sort(key=order)
    families: dict[tuple[str, str, bool], list[TaskRow]] = {}
    for row in rows:
        if row.complete:
            families.setdefault((row.family, row.agent, row.confined), []).append(row)
    family_rows = [
        FamilyRow(
            family=fam,
            agent=label,
            confined=confined,
            tasks=len(group),
            normalised_tasks=sum(r.normalised_mean is not None for r in group),
            normalised_mean=_mean(r.normalised_mean for r in group),
            task_ids=[r.task_id for r in group],
        )
        for (fam, label, confined), group in families.items()
    ]
    family_rows.sort(
        key=lambda f: (
            f.family,
            not f.confined,
            f.normalised_mean is None,
            -(f.normalised_mean or 0),
        )
    )
    return Leaderboard(tasks=rows, families=family_rows, runs=len(chosen))
