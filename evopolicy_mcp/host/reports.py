"""Operator views of the records: the runs table and the full run report.

These read everything, hidden results included, so they are for the operator
CLI only; no tool, resource or prompt returns them. They need only a
:class:`~evopolicy_mcp.store.database.Store`, so ``evopolicy-mcp runs`` and ``report``
read the records without starting a host (and without resuming its work).
"""

from __future__ import annotations

import json
import platform
import sys
from importlib import metadata
from typing import Any

from evopolicy_mcp.adapters.protocol import ENTRY_POINT_GROUP
from evopolicy_mcp.evaluation import seeds
from evopolicy_mcp.host.public import budget_view, run_state
from evopolicy_mcp.host.views import (
    Confinement,
    EventView,
    RunReport,
    RunRow,
    ScoreGap,
    SplitResult,
    SubmissionDetail,
)
from evopolicy_mcp.store.database import Store
from evopolicy_mcp.store.eviction import stored_bytes
from evopolicy_mcp.store.records import EventRecord, ResultRecord, RunRecord, SubmissionRecord
from evopolicy_mcp.tasks.model import Task

__all__ = [
    "agent_of",
    "build_report",
    "build_rows",
    "confinement_of",
    "reproducibility",
    "seed_derivation",
]

_PACKAGES = ("evopolicy-mcp", "gymnasium", "numpy", "pydantic", "mcp")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def seed_derivation() -> str:
    """How hidden seeds derive from the run secret (the seeds module's own account)."""
    doc = seeds.__doc__ or ""
    return doc.split(">>>", 1)[0].strip()


def _adapter_package(adapter: str) -> dict[str, str | None]:
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == adapter:
            dist = ep.dist
            return {
                "entry_point": ep.value,
                "distribution": dist.metadata["Name"] if dist else None,
                "version": dist.version if dist else None,
            }
    return {"entry_point": None, "distribution": None, "version": None}


def reproducibility(task: Task, seed: int | None) -> dict[str, Any]:
    """What a run records at start so a benchmark can be re-run and compared.

    The secret itself is never recorded here: with a fixed seed it follows from
    the seed, otherwise it is random and stays in the run row only.
    """
    return {
        "task_id": task.id,
        "task_digest": task.digest,
        "task_file": str(task.source) if task.source else None,
        "adapter": task.adapter,
        "adapter_package": _adapter_package(task.adapter),
        "packages": {name: _version(name) for name in _PACKAGES},
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "executable": sys.executable,
        "seed": seed,
        "secret": "derived from the fixed seed" if seed is not None else "random, per run",
        "seed_derivation_version": seeds.DERIVATION,
        "seed_derivation": seed_derivation(),
        "splits": {
            "train": task.budget.pool,
            "validation": task.validation.episodes,
            "test": task.assessment.episodes,
        },
    }


def _task(run: RunRecord) -> Task:
    return Task.model_validate_json(run.task_json)


def _best(subs: list[SubmissionRecord], direction: str) -> float | None:
    scores = [s.score for s in subs if s.state == "complete" and s.score is not None]
    if not scores:
        return None
    return max(scores) if direction == "maximize" else min(scores)


def _result(results: list[ResultRecord], sub_id: str | None, split: str) -> ResultRecord | None:
    for r in results:
        if r.submission_id == sub_id and r.split == split:
            return r
    return None


def agent_of(store: Store, run_id: str) -> dict[str, Any] | None:
    """The agent ``agent run`` launched on the run, and how it was confined (from its
    last ``agent_started`` event), or None."""
    started = [e for e in store.events(run_id) if e.kind == "agent_started"]
    if not started:
        return None
    detail = started[-1].detail
    return {"agent": detail.get("agent"), "confinement": detail.get("confinement") or {}}


def _confined(value: Any) -> Confinement | None:
    if isinstance(value, bool):
        return "confined" if value else "unconfined"
    if isinstance(value, str) and value:
        return "unconfined" if value.lower() in ("none", "off", "unconfined", "no") else "confined"
    if isinstance(value, dict):
        for key in ("confined", "active", "layers", "mode"):
            if key in value:
                return _confined(value[key])
    if isinstance(value, list):
        return "confined" if value else "unconfined"
    return None


def confinement_of(run: RunRecord, events: list[EventRecord]) -> Confinement:
    """How the agent was confined, as the run's record says; ``unknown`` when it is silent."""
    for event in reversed(events):
        if event.kind in ("agent_confined", "agent_confinement"):
            found = _confined(event.detail.get("confinement", event.detail))
        elif event.kind == "agent_started" and "confinement" in event.detail:
            found = _confined(event.detail["confinement"])
        else:
            continue
        if found is not None:
            return found
    found = _confined(run.reproducibility.get("confinement"))
    return found or "unknown"


def build_rows(store: Store) -> list[RunRow]:
    rows = []
    for run in store.list_runs():
        direction = json.loads(run.task_json)["score"]["direction"]
        subs = store.list_submissions(run.id)
        results = store.results(run.id) if run.selected else []
        validation = _result(results, run.selected, "validation")
        assessment = _result(results, run.selected, "test")
        rows.append(
            RunRow(
                run_id=run.id,
                task_id=run.task_id,
                state=run_state(run.state),
                submissions=sum(s.state != "refunded" for s in subs),
                best_public_score=_best(subs, direction),
                selected=run.selected,
                validation_score=validation.score if validation else None,
                assessment_score=assessment.score if assessment else None,
                created=run.created,
                confinement=confinement_of(run, store.events(run.id)),
                stored_bytes=stored_bytes(store, run.id),
            )
        )
    return rows


def _split(r: ResultRecord) -> SplitResult:
    return SplitResult(
        submission_id=r.submission_id,
        split=r.split,
        episodes=r.episodes,
        score=r.score,
        policy_failures=r.policy_failures,
        failures=r.failures,
    )


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def build_report(store: Store, run_id: str) -> RunReport | None:
    run = store.get_run(run_id)
    if run is None:
        return None
    task = _task(run)
    subs = store.list_submissions(run.id)
    results = store.results(run.id)
    usage = store.usage(run.id)
    order = {cid: i for i, cid in enumerate(run.candidates or [])}
    validation = sorted(
        (_split(r) for r in results if r.split == "validation"),
        key=lambda r: order.get(r.submission_id, len(order)),
    )
    assessment = _result(results, run.selected, "test")
    gap = None
    if run.selected is not None:
        public = next((s.score for s in subs if s.id == run.selected), None)
        val = _result(results, run.selected, "validation")
        v = val.score if val else None
        a = assessment.score if assessment else None
        gap = ScoreGap(
            public=public,
            validation=v,
            assessment=a,
            public_minus_validation=_diff(public, v),
            validation_minus_assessment=_diff(v, a),
            public_minus_assessment=_diff(public, a),
        )
    repro = dict(run.reproducibility)
    repro["submissions"] = [
        {"submission_id": s.id, "selector": s.selector, "program_digest": s.program_digest}
        for s in subs
    ]
    return RunReport(
        run_id=run.id,
        task_id=run.task_id,
        task_title=task.title,
        state=run_state(run.state),
        created=run.created,
        deadline=run.deadline,
        finalized=run.finalized,
        direction=task.score.direction,
        budget=budget_view(task),
        episodes_used=usage.episodes,
        submissions_used=usage.submissions,
        candidates=list(run.candidates or []),
        selected=run.selected,
        selection_reason=run.selection_reason,
        submissions=[
            SubmissionDetail(
                submission_id=s.id,
                ordinal=s.ordinal,
                selector=s.selector,
                episodes=len(s.indices),
                program_digest=s.program_digest,
                state=s.state,
                score=s.score,
                policy_failures=s.policy_failures,
                failures=s.failures,
                message=s.message,
                created=s.created,
                finished=s.finished,
            )
            for s in subs
        ],
        validation=validation,
        assessment=_split(assessment) if assessment else None,
        gap=gap,
        error=run.error if run.state != "finalized" else None,
        reproducibility=repro,
        stored_bytes=stored_bytes(store, run.id),
        agent=agent_of(store, run.id),
        events=[
            EventView(
                seq=e.seq, at=e.at, submission_id=e.submission_id, kind=e.kind, detail=e.detail
            )
            for e in store.events(run.id)
        ],
    )
