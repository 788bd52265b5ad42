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
    "EventView",
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
        description="wall-clock limit of a run from start_run, if any"
    )
    validation_candidates: int = Field(description="most candidates finalize accepts")


class TaskInfo(_View):
    id: str
    title: str
    summary: str
    budget: BudgetView


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
    id: str
    title: str
    summary: str
    description: str
    adapter: str
    parameters: dict[str, Any]
    observation_space: dict[str, Any]
    action_space: dict[str, Any]
    metadata: dict[str, Any]
    metrics: dict[str, str] = Field(description="per-episode metric name -> meaning")
    max_steps: int | None
    score: ScoreView
    budget: BudgetView
    limits: LimitsView
    rules: list[str]
    policy_abi: str = Field(description="how to write policy.py")
    baseline_files: dict[str, str] = Field(
        description="the baseline program: relative path -> source"
    )


class Remaining(_View):
    episodes: int
    submissions: int
    wall_seconds: float | None = Field(
        description="seconds left before submissions stop, if limited"
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
    metrics: dict[str, float] = Field(default_factory=dict)
    report: dict[str, Any] | None = Field(
        default=None, description="the environment's diagnostics of this episode, if it gives any"
    )


class SubmissionView(_View):
    run_id: str
    submission_id: str
    status: SubmissionStatus = Field(
        description="running | complete | failed (a host fault: not charged)"
    )
    episodes: str = Field(description="the selector as submitted")
    indices_total: int
    episodes_done: int
    score: float | None
    score_metric: str
    direction: Literal["maximize", "minimize"]
    policy_failures: int
    failures: dict[str, int]
    metrics: dict[str, float]
    episode_summaries: list[EpisodeView]
    traces: list[Trace] = Field(
        description="step traces of the episodes on this page that have one"
    )
    offset: int = 0
    next_offset: int | None = None
    hint: str | None = None
    remaining: Remaining
    program_digest: str
    message: str | None = None


class SubmissionBrief(_View):
    submission_id: str
    episodes: str
    indices_total: int
    status: SubmissionStatus
    score: float | None
    policy_failures: int


class RunStatus(_View):
    run_id: str
    task_id: str
    open: bool
    state: RunState
    episodes_used: int
    submissions_used: int
    remaining: Remaining
    submissions: list[SubmissionBrief]
    wall_seconds_left: float | None


class FinalizeAck(_View):
    run_id: str
    candidates: list[str]
    state: RunState
    message: str


# ------------------------------------------------------------- operator views


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
    events: list[EventView]
