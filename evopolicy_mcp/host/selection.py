"""Selection among finalize candidates, and fallback candidates, as pure functions.

The rule: best validation score in the task's direction, then fewer policy
failures, then the agent's candidate order. A candidate without a usable score
(None or NaN) ranks below every candidate with one.

Fallback, for a run its agent left open: its complete submissions ranked by
public score the same way (newer first on ties), one per distinct program.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["CandidateScore", "fallback_candidates", "select_candidate"]


@dataclass(frozen=True)
class CandidateScore:
    submission_id: str
    score: float | None
    policy_failures: int


def _usable(score: float | None) -> bool:
    return score is not None and not math.isnan(score)


def _fmt(score: float | None) -> str:
    return f"{score:.6g}" if _usable(score) else "no score"


def _rank_key(c: CandidateScore, sign: float, position: int) -> tuple[int, float, int, int]:
    if not _usable(c.score):
        return (1, 0.0, c.policy_failures, position)
    assert c.score is not None
    return (0, sign * c.score, c.policy_failures, position)


def fallback_candidates(
    submissions: Sequence[tuple[CandidateScore, str]],
    direction: Literal["maximize", "minimize"],
    limit: int,
) -> list[str]:
    """Up to ``limit`` submission ids from (public score, program digest) pairs, oldest
    first in ``submissions``: best public score first, one per program."""
    sign = -1.0 if direction == "maximize" else 1.0
    order = sorted(
        range(len(submissions)),
        key=lambda i: _rank_key(submissions[i][0], sign, -i),
    )
    chosen: list[str] = []
    programs: set[str] = set()
    for i in order:
        score, digest = submissions[i]
        if digest not in programs:
            programs.add(digest)
            chosen.append(score.submission_id)
    return chosen[:limit]


def select_candidate(
    candidates: Sequence[CandidateScore], direction: Literal["maximize", "minimize"]
) -> tuple[int, str]:
    """Index of the selected candidate in ``candidates`` and a one-line reason."""
    if not candidates:
        raise ValueError("no candidates to select from")
    sign = -1.0 if direction == "maximize" else 1.0

    def key(position: int) -> tuple[int, float, int, int]:
        return _rank_key(candidates[position], sign, position)

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
