"""CodeChef MINESWPR: generator, the statement's sample, limits, survey answers."""

from __future__ import annotations

import numpy as np
import pytest

from evopolicy_mcp.environments.contests import minesweeper
from evopolicy_mcp.environments.turns import TurnEpisode
from tests.support.games import InvalidAction, game, play


def sample() -> TurnEpisode:
    g = game("contests", "codechef-minesweeper")
    field = np.zeros((4, 4), dtype=bool)
    field[1, 2] = field[3, 3] = True
    g.load(field, 3)
    return g


def test_generator_follows_the_statement_on_many_seeds() -> None:
    sizes, equal = set(), 0
    for seed in range(200):
        field, k = minesweeper.generate(seed)
        n, m = len(field), int(field.sum())
        sizes.add(n)
        assert 30 <= n <= 50 and field.shape == (n, n)
        assert 0.06 < m / (n * n) < 0.34  # P in [0.1, 0.3], binomial spread
        assert m <= k <= n * n // 2
        equal += k == m
    assert len(sizes) > 15 and 70 <= equal <= 130  # K = M with probability 1/2


def test_the_statement_sample_scores_3_75() -> None:
    g = sample()
    first = g.reset()
    assert (first["N"], first["M"], first["K"], first["result"]) == (4, 2, 3, None)
    answers = [
        g.step(action).observation["result"]
        for action in (
            [0, 0, 0], [0, 2, 3], [0, 1, 2], [1, 1, 2], [0, 2, 3], [0, 3, 2], [1, 2, 2], [1, 3, 3]
        )
    ]  # fmt: skip
    assert answers == [0, 2, -1, None, 1, 1, None, None]
    done = g.step([2, 0, 0])
    assert done.terminated and done.reward == -3.75
    assert g.metrics() == {
        "score": 3.75, "surveys": 5.0, "neutralizations": 3.0, "mines_left": 0.0, "invalid": 0.0
    }  # fmt: skip


@pytest.mark.parametrize(
    ("actions", "why"),
    [
        ([[2, 0, 0]], "live mine"),
        ([[0, 4, 0]], "outside"),
        ([[1, 0, 4]], "outside"),
        ([[1, 0, 0]] * 4, "beyond the K = 3"),
        ([[0, 0, 0]] * 17, "beyond the limit of N"),
        ([[3, 0, 0]], "action"),
        (["S 0 0"], "action"),
    ],
)
def test_breaking_a_limit_is_invalid(actions: list, why: str) -> None:
    g = sample()
    g.reset()
    with pytest.raises(InvalidAction, match=why):
        for action in actions:
            g.step(action)
    assert g.metrics()["invalid"] == 1.0 and g.metrics()["score"] == minesweeper.UNFINISHED


def test_surveys_count_live_neighbours_on_a_generated_field() -> None:
    g = game("contests", "codechef-minesweeper", seed=9)
    first = g.reset()
    n = first["N"]
    field = np.array(g.mines, dtype=bool).reshape(n, n)
    padded = np.pad(field, 1)
    for x, y in [(0, 0), (n - 1, n - 1), (n // 2, 3), (5, n - 1)]:
        got = g.step([0, x, y]).observation["result"]
        around = int(padded[x : x + 3, y : y + 3].sum()) - int(field[x, y])
        assert got == (-1 if field[x, y] else around)


def test_the_baseline_surveys_everything_and_replays_identically() -> None:
    first = play("contests", {"game": "codechef-minesweeper"}, 4, "contests-codechef-minesweeper")
    assert first == play(
        "contests", {"game": "codechef-minesweeper"}, 4, "contests-codechef-minesweeper"
    )
    metrics = first[0]
    n2 = metrics["surveys"]
    assert metrics["mines_left"] == 0 and metrics["score"] == pytest.approx(10 * (n2 + 1) / n2)
