"""Feedback: the public result of evaluating one program on a list of episodes.

These models are what the host stores and what the MCP layer returns (after
the host strips anything private). Every field is bounded: excerpts are cut
to fixed sizes and traces cover a few episodes and a bounded number of steps.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from evopolicy_mcp.runner.template import Failure

__all__ = [
    "EpisodeSummary",
    "Failure",
    "Feedback",
    "Trace",
    "TraceStep",
]


class EpisodeSummary(BaseModel):
    index: int = Field(
        description="position of the episode in the evaluated list (pool index for training)"
    )
    status: Literal["ok", "failed"]
    failure: Failure | None = None
    message: str | None = Field(default=None, description="one-line reason for a failure")
    traceback: str | None = Field(default=None, description="bounded traceback excerpt")
    stderr: str | None = Field(default=None, description="bounded tail of what the policy printed")
    episode_return: float = Field(description="sum of rewards over the steps taken")
    steps: int
    terminated: bool = False
    truncated: bool = False
    metrics: dict[str, float] = Field(default_factory=dict)
    report: dict[str, Any] | None = Field(
        default=None,
        description="the adapter's bounded diagnostics of the episode (training feedback only)",
    )
    seconds: float = 0.0


class TraceStep(BaseModel):
    t: int
    observation: Any
    action: Any
    reward: float


class Trace(BaseModel):
    index: int
    steps: list[TraceStep]
    truncated: bool = Field(description="true when the episode had more steps than the trace keeps")
    artifacts: list[str] = Field(
        default_factory=list, description="names of the files the adapter saved for this episode"
    )


class Feedback(BaseModel):
    task_id: str
    score: float | None = Field(
        description="the task's score over these episodes (None when no episodes)"
    )
    score_metric: str
    direction: Literal["maximize", "minimize"]
    episodes: list[EpisodeSummary]
    metrics: dict[str, float] = Field(default_factory=dict, description="task-level aggregates")
    failures: dict[str, int] = Field(default_factory=dict, description="count per failure code")
    traces: list[Trace] = Field(default_factory=list)
    seconds: float = 0.0

    @property
    def policy_failures(self) -> int:
        return sum(self.failures.values())

    def summary_line(self) -> str:
        n = len(self.episodes)
        fails = self.policy_failures
        score = "n/a" if self.score is None else f"{self.score:.4g}"
        return f"score {score} ({self.score_metric}, {self.direction}) over {n} episodes, {fails} policy failures"


def bounded_text(text: str, limit: int) -> str:
    """Keep the tail of ``text`` within ``limit`` characters, marking the cut."""
    if len(text) <= limit:
        return text
    return "...[cut]...\n" + text[-limit:]
