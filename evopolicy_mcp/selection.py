"""Selection among finalize candidates, as a pure function.

The rule: best validation score in the task's direction, then fewer policy
failures, then the agent's candidate order. A candidate without a usable score
(None or NaN) ranks below every candidate with one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["CandidateScore", "select_candidate"]


@dataclass(frozen=True)
class CandidateScore:
    submission_id: str
    score: float | None
    policy_failures: int


def _usable(score: float | None) -> bool:
    return score is not None and not math.isnan(score)


def _fmt(score: float | None) -> str:
    return f"{score:.6g}" if _usable(score) else "no score"


def select_candidate(
    candidates: Sequence[CandidateScore], direction: Literal["maximize", "minimize"]
) -> tuple[int, str]:
    """Index of the selected candidate in ``candidates`` and a one-line reason."""
    if not candidates:
        raise ValueError("no candidates to select from")
    sign = -1.0 if direction == "maximize" else 1.0

    def key(position: int) -> tuple[int, float, int, int]:
        c = candidates[position]
        if not _usable(c.score):
            return (1, 0.0, c.policy_failures, position)
        assert c.score is not None
        return (0, sign * c.score, c.policy_failures, position)

    order = sorted(range(len(candidates)), key=key)
    best = candidates[order[0]]
    if len(candidates) == 1:
        return order[0], f"{best.submission_id} was the only candidate"
    runner_up = candidates[order[1]]
    best_key, next_key = key(order[0]), key(order[1])
    if best_key[:2] != next_key[:2]:
        reason = (
            f"{best.submission_id} has the best validation score ({_fmt(best.score)}, "
            f"{direction}); next {runner_up.submission_id} ({_fmt(runner_up.score)})"
        )
    elif best_key[2] != next_key[2]:
        reason = (
            f"{best.submission_id} ties {runner_up.submission_id} on score "
            f"({_fmt(best.score)}) and has fewer policy failures "
            f"({best.policy_failures} vs {runner_up.policy_failures})"
        )
    else:
        reason = (
            f"{best.submission_id} ties {runner_up.submission_id} on score "
            f"({_fmt(best.score)}) and policy failures ({best.policy_failures}) "
            "and comes first in the candidate order"
        )
    return order[0], reason
