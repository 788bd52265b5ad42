"""AHC015 Halloween Candy: generator, drops and tilts, the score of hand-made boxes."""

from __future__ import annotations

import numpy as np
import pytest

from evopolicy_mcp.environments.contests import ahc015
from tests.support.games import InvalidAction, game, play


def test_generator_draws_flavours_and_drops_as_the_statement_says() -> None:
    flavours, ratios = [], []
    for seed in range(200):
        f, p = ahc015.generate(seed)
        assert len(f) == len(p) == 100 and set(f) <= {1, 2, 3}
        assert all(1 <= p[t - 1] <= 101 - t for t in range(1, 101))
        flavours += f
        ratios += [(p[t - 1] - 0.5) / (101 - t) for t in range(1, 100)]
    counts = np.bincount(flavours)[1:] / len(flavours)
    assert np.allclose(counts, 1 / 3, atol=0.01)
    assert abs(np.mean(ratios) - 0.5) < 0.01


def test_tilts_slide_every_candy_to_one_side_in_order() -> None:
    grid = bytearray(100)
    grid[0] = 1  # candy at (0, 0)
    ahc015.tilt(grid, 3)  # R
    assert grid[9] == 1 and grid.count(0) == 99
    grid[0] = 2  # the next candy drops into the first empty cell, (0, 0)
    ahc015.tilt(grid, 2)  # L
    assert list(grid[:3]) == [2, 1, 0]
    ahc015.tilt(grid, 1)  # B: both fall to row 9 in their columns
    assert grid[90] == 2 and grid[91] == 1 and grid.count(0) == 98
    grid[5] = 3
    ahc015.tilt(grid, 0)  # F
    assert (grid[0], grid[1], grid[5]) == (2, 1, 3) and grid.count(0) == 97


@pytest.mark.parametrize(
    ("grid", "expected"),
    [
        (bytes([1] * 100), 1_000_000),
        (bytes([1] * 50 + [2] * 50), 1_000_000),
        (bytes([1 + (r + c) % 2 for r in range(10) for c in range(10)]), 20_000),
    ],
    ids=["one flavour", "two halves", "checkerboard"],
)
def test_score_of_hand_made_boxes(grid: bytes, expected: int) -> None:
    assert ahc015.score(grid) == expected


def test_an_episode_drops_each_candy_where_p_says_and_ends_full() -> None:
    g = game("contests", "ahc015", seed=4)
    first = g.reset()
    assert first["t"] == 1 and len(first["flavors"]) == 100
    empty = [k for k in range(100)]
    assert first["placed"] == list(divmod(empty[first["p"] - 1], 10))
    steps = 0
    obs = first
    while True:
        grid = obs["grid"].reshape(-1).tolist()
        step = g.step(steps % 4)
        steps += 1
        obs = step.observation
        if step.terminated:
            break
        after = bytearray(grid)
        ahc015.tilt(after, (steps - 1) % 4)
        free = [k for k in range(100) if after[k] == 0]
        assert obs["placed"] == list(divmod(free[obs["p"] - 1], 10))
    assert steps == 99 and int((obs["grid"] == 0).sum()) == 0
    assert g.metrics()["score"] == step.reward == ahc015.score(bytes(obs["grid"].reshape(-1)))


def test_other_actions_are_invalid() -> None:
    for bad in (4, -1, "F", 1.0):
        g = game("contests", "ahc015")
        g.reset()
        with pytest.raises(InvalidAction):
            g.step(bad)


def test_the_baseline_scores_and_replays_identically() -> None:
    first = play("contests", {"game": "ahc015"}, 2, "contests-ahc015")
    assert first == play("contests", {"game": "ahc015"}, 2, "contests-ahc015")
    assert first[0]["score"] > 150_000
