"""AHC046 Skating with Blocks: the statement's sample, moves, slides, blocks, the score."""

from __future__ import annotations

import numpy as np
import pytest

from evopolicy_mcp.environments.contests import ahc046
from evopolicy_mcp.environments.turns import TurnEpisode
from tests.support.games import InvalidAction, game, play

SAMPLE = [
    (3, 7), (14, 16), (19, 19), (0, 8), (0, 10), (17, 11), (11, 7), (19, 12), (10, 12), (5, 4),
    (13, 5), (19, 10), (19, 14), (1, 19), (8, 5), (6, 9), (9, 3), (10, 0), (8, 7), (17, 17),
    (4, 2), (1, 13), (9, 17), (13, 4), (9, 14), (19, 13), (16, 9), (8, 17), (10, 18), (14, 3),
    (14, 13), (18, 19), (3, 14), (8, 13), (7, 9), (12, 18), (8, 6), (10, 7), (8, 18), (7, 17),
]  # fmt: skip
CODE = {kind + d: 4 * k + i for k, kind in enumerate("MSA") for i, d in enumerate("UDLR")}


def on(points: list[tuple[int, int]]) -> TurnEpisode:
    g = game("contests", "ahc046")
    g.targets = np.array(points)  # type: ignore[attr-defined]
    g.points = list(points)  # type: ignore[attr-defined]
    g.r, g.c = points[0]  # type: ignore[attr-defined]
    g.reset()
    return g


def test_generator_draws_forty_distinct_cells() -> None:
    corners = 0
    for seed in range(200):
        cells = [tuple(p) for p in ahc046.generate(seed).tolist()]
        assert len(set(cells)) == 40 and all(0 <= r < 20 and 0 <= c < 20 for r, c in cells)
        corners += sum(1 for r, c in cells if (r, c) == (0, 0))
    assert 5 <= corners <= 40  # (0, 0) is among 40 of 400 cells: about 20 of 200 cases


def test_the_statement_sample_visits_four_targets_and_scores_5() -> None:
    assert len(SAMPLE) == 40
    g = on(SAMPLE)
    actions = [
        "SD",
        "MU",
        "AD",
        "MU",
        "MU",
        "MU",
        "MU",
        "SR",
        "ML",
        "ML",
        "ML",
        "SD",
        "SR",
        "SL",
        "SU",
        "MR",
        "MR",
    ]
    for a in actions:
        g.step(CODE[a])
    assert g.metrics() == {"score": 5.0, "visited": 4.0, "actions": 17.0, "invalid": 0.0}


def test_slides_stop_before_blocks_and_targets_count_only_when_stopped_on() -> None:
    points = [(0, 0), (0, 5), (5, 5)] + [(19, k) for k in range(37)]
    g = on(points)
    obs = g.step(CODE["SR"]).observation  # slides over (0, 5) to (0, 19)
    assert obs["position"] == [0, 19] and obs["next"] == 1
    g.step(CODE["AL"])  # a block at (0, 18)
    assert g.step(CODE["SL"]).observation["position"] == [0, 19]  # blocked at once: stays
    g.step(CODE["AL"])  # removed
    g.step(CODE["AD"])  # block at (1, 19)
    g.step(CODE["SL"])  # to (0, 0)
    for _ in range(5):
        obs = g.step(CODE["MR"]).observation
    assert obs["position"] == [0, 5] and obs["next"] == 2
    assert obs["blocks"][1][19] == 1 and int(obs["blocks"].sum()) == 1


def test_visiting_every_target_scores_1640_minus_actions() -> None:
    points = [(0, k) for k in range(20)] + [(1, 19 - k) for k in range(20)]
    g = on(points)
    step = None
    for _ in range(19):
        step = g.step(CODE["MR"])
    step = g.step(CODE["MD"])
    for _ in range(19):
        step = g.step(CODE["ML"])
    assert step is not None and step.terminated and step.reward == 1640 - 39
    assert g.metrics()["score"] == 1601 and g.metrics()["visited"] == 39


@pytest.mark.parametrize("action", ["MU", "AU"], ids=["move off the rink", "alter off the rink"])
def test_leaving_the_rink_is_invalid(action: str) -> None:
    g = on([(0, 3)] + [(5 + k // 20, k % 20) for k in range(39)])
    with pytest.raises(InvalidAction, match="off the rink|the wall"):
        g.step(CODE[action])


def test_moving_into_a_block_is_invalid() -> None:
    g = on([(0, 3)] + [(5 + k // 20, k % 20) for k in range(39)])
    g.step(CODE["AD"])
    with pytest.raises(InvalidAction, match="a block"):
        g.step(CODE["MD"])
    assert g.metrics()["invalid"] == 1.0


def test_the_episode_is_cut_at_1600_actions_with_score_m_plus_1() -> None:
    g = on([(0, 0), (19, 19)] + [(10, k) for k in range(38)])
    step = None
    for _ in range(1600):
        step = g.step(CODE["AD"])
    assert step is not None and step.truncated and not step.terminated
    assert g.metrics()["score"] == 1.0 and step.reward == 1.0


def test_the_baseline_visits_all_targets_and_replays_identically() -> None:
    first = play("contests", {"game": "ahc046"}, 1, "contests-ahc046")
    assert first == play("contests", {"game": "ahc046"}, 1, "contests-ahc046")
    assert first[0]["visited"] == 39 and first[0]["score"] == 1640 - first[0]["actions"] > 900
