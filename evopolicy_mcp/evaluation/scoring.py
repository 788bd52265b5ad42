"""Scores: per-episode values aggregated into one number in the task's direction.

Invariant: an episode that ended in a policy failure counts with the task's
``failure_value`` for the score metric, so failing early never pays (a
Pendulum policy that crashes at step one does not escape its negative return).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evopolicy_mcp.adapters.protocol import AdapterError
from evopolicy_mcp.evaluation.feedback import EpisodeSummary
from evopolicy_mcp.tasks.model import Score

__all__ = ["AGGREGATES", "aggregate_metrics", "episode_value", "score_episodes"]

AGGREGATES: dict[str, Callable[[Sequence[float]], float]] = {
    "mean": statistics.fmean,
    "median": statistics.median,
    "min": min,
    "max": max,
}


def episode_value(summary: EpisodeSummary, score: Score) -> float:
    if summary.status == "failed":
        return score.failure_value
    if score.metric == "return":
        return summary.episode_return
    if score.metric == "steps":
        return float(summary.steps)
    value = summary.metrics.get(score.metric)
    if value is None or not math.isfinite(value):
        raise AdapterError(f"the adapter reported no finite metric {score.metric!r} for an episode")
    return value


def score_episodes(
    summaries: Sequence[EpisodeSummary], score: Score, adapter: Any = None
) -> float | None:
    """The task score, or None for no episodes. ``score.aggregate`` names a
    built-in aggregate or a scorer the adapter provides in ``adapter.scorers``
    (a mapping of name -> function(summaries, score) -> float)."""
    if not summaries:
        return None
    custom: Mapping[str, Callable[..., float]] = getattr(adapter, "scorers", None) or {}
    if score.aggregate in custom:
        return float(custom[score.aggregate](summaries, score))
    if score.aggregate not in AGGREGATES:
        known = ", ".join([*AGGREGATES, *custom])
        raise AdapterError(f"unknown score aggregate {score.aggregate!r}; known: {known}")
    return float(AGGREGATES[score.aggregate]([episode_value(s, score) for s in summaries]))


def aggregate_metrics(summaries: Sequence[EpisodeSummary]) -> dict[str, float]:
    """Task-level public aggregates: mean return and length, failure rate, and
    the mean of every per-episode metric over the episodes that report it."""
    if not summaries:
        return {}
    out = {
        "mean_return": statistics.fmean(s.episode_return for s in summaries),
        "mean_steps": statistics.fmean(s.steps for s in summaries),
        "failure_rate": sum(s.status == "failed" for s in summaries) / len(summaries),
    }
    names = sorted({name for s in summaries for name in s.metrics})
    for name in names:
        values = [s.metrics[name] for s in summaries if name in s.metrics]
        finite = [v for v in values if math.isfinite(v)]
        if finite:
            out[f"mean_{name}"] = statistics.fmean(finite)
    return out
