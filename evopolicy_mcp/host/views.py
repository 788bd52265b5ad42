"""Result models: what the host returns.

Two families, kept apart on purpose:

- Agent views (:class:`TaskInfo` ... :class:`FinalizeAck`) are every result an
  agent can receive. They have no field that could carry a seed, the run
  secret, a host path, or a validation or assessment result, and they forbid
  extra fields, so private data cannot ride along by accident.
- Operator views (:class:`RunRow`, :class:`RunReport`) hold everything the
  host knows, including the hidden results. Only the operator CLI prints them;
  no tool, resource or prompt returns them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evopolicy_mcp.evaluation.feedback import Trace

__all__ = [
    "BudgetView",
    "EpisodeView",
    "EvaluationView",
    "EventView",
    "FamilyBrief",
    "FinalizeAck",
    "LimitsView",
    "Remaining",
    "RunInfo",
    "RunReport",
    "RunRow",
    "RunState",
    "RunStatus",
    "ScoreGap",
    "ScoreView",
    "SplitResult",
    "SubmissionBrief",
    "SubmissionDetail",
    "SubmissionStatus",
    "SubmissionView",
    "TaskInfo",
    "TaskList",
    "TaskSpec",
]

RunState = Literal["open", "finalizing", "finalized"]
SubmissionStatus = Literal["running", "complete", "failed"]


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------- agent views


class BudgetView(_View):
    episodes: int = Field(description="total training episodes of a run")
    submissions: int = Field(description="most submissions per run")
    per_submission: int = Field(description="most episodes in one submission")
    pool: int = Field(description="training pool size: valid indices are 0..pool-1")
    wall_seconds: float | None = Field(
        default=None, description="wall-clock limit of a run from start_run, if any"
    )
    validation_candidates: int = Field(description="most candidates finalize accepts")
    finish: Literal["early", "exhaust"] = Field(
        default="early",
        description="early: finalize whenever; exhaust: finalize only once every episode "
        "of the budget is spent",
    )


class TaskInfo(_View):
    id: str
    family: str = Field(description="the family the task belongs to (tasks are grouped by it)")
    title: str
    summary: str
    budget: BudgetView
    available: bool = Field(
        description="false when this server lacks the task's environment package: "
        "describe_task and start_run then say what the operator must install"
    )


class FamilyBrief(_View):
    family: str
    title: str
    tasks: int = Field(description="how many tasks the family has")
    available: int = Field(description="how many of them this server can run")


class TaskList(_View):
    families: list[FamilyBrief] = Field(
        description="every family listed, with its task count (list_tasks(family=F) for one)"
    )
    total: int = Field(description="tasks listed in all, over every page")
    offset: int = 0
    next_offset: int | None = Field(
        default=None, description="where the next page starts: call again with offset=this"
    )
    hint: str | None = None
    tasks: list[TaskInfo]


class ScoreView(_View):
    metric: str
    aggregate: str
    direction: Literal["maximize", "minimize"]
    failure_value: float = Field(
        description="metric value of an episode that ended in a policy failure"
    )
    description: str


class LimitsView(_View):
    act_seconds: float
    startup_seconds: float
    episode_seconds: float
    memory_mb: int
    cpu_seconds: int


class TaskSpec(_View):
    """A task's public spec. A long one comes in pages: page 1 holds the fields from
    ``title`` to ``limits``, and the fields after them fill the next pages in order."""

    id: str
    family: str | None = None
    title: str | None = None
    summary: str | None = None
    description: str | None = None
    adapter: str | None = None
    parameters: dict[str, Any] | None = None
    observation_space: dict[str, Any] | None = None
    action_space: dict[str, Any] | None = None
    max_steps: int | None = None
    score: ScoreView | None = None
    budget: BudgetView | None = None
    limits: LimitsView | None = None
    baseline_files: dict[str, str] | None = Field(
        default=None, description="the baseline program: relative path -> source"
    )
    policy_abi: str | None = Field(default=None, description="how to write policy.py")
    rules: list[str] | None = None
    metrics: dict[str, str] | None = Field(
        default=None, description="per-episode metric name -> meaning"
    )
    metadata: dict[str, Any] | None = None
    page: int = 1
    pages: int = 1
    hint: str | None = Field(default=None, description="how to read the next page")


class Remaining(_View):
    episodes: int
    submissions: int
    wall_seconds: float | None = Field(
        default=None, description="seconds left before submissions stop, if limited"
    )


class RunInfo(_View):
    run_id: str
    task_id: str
    state: RunState
    budget: BudgetView
    rules: list[str]
    remaining: Remaining


class EpisodeView(_View):
    index: int = Field(description="training-pool index")
    status: Literal["ok", "failed"]
    failure: str | None = None
    message: str | None = None
    traceback: str | None = None
    stderr: str | None = None
    episode_return: float
    steps: int
    terminated: bool = False
    truncated: bool = False
    metrics: dict[str, float] = Field(
        default_factory=dict,
        description="the episode's metrics; in a page of many episodes those equal to 0 are left out",
    )
    report: dict[str, Any] | None = Field(
        default=None, description="the environment's diagnostics of this episode, if it gives any"
    )


class SubmissionView(_View):
    """A submission's feedback. A field holding its default (null, false, 0, empty) is
    left out of what the agent reads."""

    run_id: str
    submission_id: str
    status: SubmissionStatus = Field(
        description="running | complete | failed (a host fault: not charged)"
    )
    message: str | None = None
    hint: str | None = Field(default=None, description="what to call next, when there is more")
    episodes: str = Field(description="the selector as submitted")
    indices_total: int
    episodes_done: int
    score: float | None = None
    score_metric: str
    direction: Literal["maximize", "minimize"]
    policy_failures: int
    failures: dict[str, int]
    metrics: dict[str, float] = Field(default_factory=dict)
    remaining: Remaining
    program_digest: str
    offset: int = 0
    next_offset: int | None = None
    episode_summaries: list[EpisodeView] = Field(default_factory=list)
    traces: list[Trace] = Field(
        default_factory=list, description="step traces of the episodes on this page that have one"
    )
    evicted: str | None = Field(
        default=None,
        description="set when this submission's step traces and episode files were evicted "
        "to keep the run within its storage cap",
    )


class EvaluationView(_View):
    """``evaluate --json``: one program on a task's episodes, with the feedback fields
    named as in :class:`SubmissionView`."""

    task_id: str
    split: str
    indices_total: int
    score: float | None = None
    score_metric: str
    direction: Literal["maximize", "minimize"]
    policy_failures: int
    failures: dict[str, int]
    metrics: dict[str, float] = Field(default_factory=dict)
    seconds: float
    episode_summaries: list[EpisodeView]
    traces: list[Trace] = Field(default_factory=list)


class SubmissionBrief(_View):
    submission_id: str
    episodes: str
    indices_total: int
    status: SubmissionStatus
    score: float | None = None
    policy_failures: int = 0


class RunStatus(_View):
    run_id: str
    task_id: str
    open: bool
    state: RunState
    episodes_used: int
    submissions_used: int
    remaining: Remaining
    wall_seconds_left: float | None = None
    hint: str | None = None
    offset: int = 0
    next_offset: int | None = None
    submissions: list[SubmissionBrief] = Field(default_factory=list)


class FinalizeAck(_View):
    run_id: str
    candidates: list[str]
    state: RunState
    message: str


# ------------------------------------------------------------- operator views


# How `agent run` confined a run's agent, as its record says; "unknown" when the record is
# silent (no agent run, or a run from before confinement was recorded): not confined.
Confinement = Literal["confined", "unconfined", "unknown"]


class RunRow(BaseModel):
    run_id: str
    task_id: str
    state: RunState
    submissions: int
    best_public_score: float | None
    selected: str | None
    validation_score: float | None
    assessment_score: float | None
    created: float
    confinement: Confinement = Field(
        default="unknown", description="how `agent run` confined the agent (unknown: not)"
    )
    stored_bytes: int = Field(default=0, description="bytes the run holds in the records")


class SubmissionDetail(BaseModel):
    submission_id: str
    ordinal: int
    selector: str
    episodes: int
    program_digest: str
    state: str
    score: float | None
    policy_failures: int | None
    failures: dict[str, int]
    message: str | None
    created: float
    finished: float | None


class SplitResult(BaseModel):
    submission_id: str
    split: str
    episodes: int
    score: float | None
    policy_failures: int
    failures: dict[str, int]


class ScoreGap(BaseModel):
    """Scores of the selected program on the three episode sets."""

    public: float | None
    validation: float | None
    assessment: float | None
    public_minus_validation: float | None
    validation_minus_assessment: float | None
    public_minus_assessment: float | None


class EventView(BaseModel):
    seq: int
    at: float
    submission_id: str | None
    kind: str
    detail: dict[str, Any]


class RunReport(BaseModel):
    run_id: str
    task_id: str
    task_title: str
    state: RunState
    created: float
    deadline: float | None
    finalized: float | None
    direction: Literal["maximize", "minimize"]
    budget: BudgetView
    episodes_used: int
    submissions_used: int
    candidates: list[str]
    selected: str | None
    selection_reason: str | None
    submissions: list[SubmissionDetail]
    validation: list[SplitResult]
    assessment: SplitResult | None
    gap: ScoreGap | None
    error: str | None = Field(default=None, description="last host fault during finalize, if any")
    reproducibility: dict[str, Any]
    stored_bytes: int = Field(default=0, description="bytes the run holds in the records")
    events: list[EventView]
    agent: dict[str, Any] | None = Field(
        default=None,
        description="the agent `agent run` launched: its name and how it was confined",
    )
