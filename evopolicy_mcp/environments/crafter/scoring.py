"""Crafter's task scores: the canonical achievement score and a survival score.

Both are adapter scorers (``adapter.scorers[name](summaries, score) -> float``)
named by a task's ``score.aggregate``. An episode that ended in a policy
failure counts as unlocking nothing (``crafter``) or with the task's
``failure_value`` (``survival``), so failing never pays.

``crafter`` (Hafner, 2021): per achievement, the success rate ``s_i`` is the
percentage of episodes that unlocked it at least once; the score is
``exp(mean_i ln(1 + s_i)) - 1`` over the 22 achievements, in percent. It
rewards breadth: unlocking a new achievement in a few episodes moves it more
than unlocking a common one in more.

``survival``: each episode is worth (0..100)::

    survival = 100 * (0.75 * vitality + 0.25 * unlocked / 22)
    vitality = sum over steps of (health + food + drink + energy) / 36, divided by the horizon

so staying alive and fed for the whole horizon gives vitality 1 and dying at
the halfway mark at most 0.5. The task score is the mean of (a) the mean over
all episodes and (b) the mean over the worst quarter (rounded up), so one
lucky episode cannot carry it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from evopolicy_mcp.adapters.protocol import AdapterError

__all__ = [
    "ACHIEVEMENTS",
    "SCORERS",
    "crafter_score",
    "robust_mean",
    "success_rates",
    "survival_value",
]

ACHIEVEMENTS = (
    "collect_coal",
    "collect_diamond",
    "collect_drink",
    "collect_iron",
    "collect_sapling",
    "collect_stone",
    "collect_wood",
    "defeat_skeleton",
    "defeat_zombie",
    "eat_cow",
    "eat_plant",
    "make_iron_pickaxe",
    "make_iron_sword",
    "make_stone_pickaxe",
    "make_stone_sword",
    "make_wood_pickaxe",
    "make_wood_sword",
    "place_furnace",
    "place_plant",
    "place_stone",
    "place_table",
    "wake_up",
)
VITALS_MAX = 36  # health, food, drink and energy, 9 each
VITALITY_WEIGHT = 0.75


class Summary(Protocol):
    """What a scorer reads of an episode summary."""

    status: str
    metrics: Mapping[str, float]


class ScoreRule(Protocol):
    metric: str
    failure_value: float


def crafter_score(rates: Sequence[float]) -> float:
    """``exp(mean ln(1 + s)) - 1`` over success rates ``s`` in percent (0..100)."""
    if not rates:
        raise ValueError("the Crafter score needs at least one success rate")
    return math.exp(statistics.fmean(math.log1p(s) for s in rates)) - 1.0


def success_rates(summaries: Sequence[Summary]) -> dict[str, float]:
    """Percentage of episodes that unlocked each achievement; failed episodes unlock nothing."""
    n = len(summaries)
    return {
        name: 100.0
        * sum(
            s.status != "failed" and s.metrics.get(f"achievement_{name}", 0.0) > 0
            for s in summaries
        )
        / n
        for name in ACHIEVEMENTS
    }


def survival_value(vitals_sum: float, horizon: int, unlocked: int) -> float:
    """One episode's survival value from its summed vitals, the horizon and the unlock count."""
    vitality = vitals_sum / (VITALS_MAX * horizon)
    progress = unlocked / len(ACHIEVEMENTS)
    return 100.0 * (VITALITY_WEIGHT * vitality + (1 - VITALITY_WEIGHT) * progress)


def robust_mean(values: Sequence[float]) -> float:
    """Mean of the overall mean and the mean of the worst quarter (rounded up)."""
    worst = sorted(values)[: math.ceil(len(values) / 4)]
    return (statistics.fmean(values) + statistics.fmean(worst)) / 2


def _crafter(summaries: Sequence[Summary], score: ScoreRule) -> float:
    return crafter_score(list(success_rates(summaries).values()))


def _survival(summaries: Sequence[Summary], score: ScoreRule) -> float:
    values = []
    for s in summaries:
        value = score.failure_value if s.status == "failed" else s.metrics.get(score.metric)
        if value is None:
            raise AdapterError(f"an episode reported no metric {score.metric!r} to score")
        values.append(value)
    return robust_mean(values)


SCORERS: dict[str, Callable[[Sequence[Any], Any], float]] = {
    "crafter": _crafter,
    "survival": _survival,
}
