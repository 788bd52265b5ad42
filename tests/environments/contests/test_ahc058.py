"""AHC058 Apple Incremental Game: generator, production order, score, invalid strengthening."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evopolicy_mcp.environments.contests import ahc058
from tests.support.games import InvalidAction, game, play


def test_generator_follows_the_statement_on_many_seeds() -> None:
    spread = []
    for seed in range(300):
        a, c = ahc058.generate(seed)
        assert len(a) == 10 and a == sorted(a) and a[0] == 1 and all(1 <= x <= 100 for x in a)
        assert c[0][0] == 1 and len(c) == 4 and all(len(row) == 10 for row in c)
        for i in range(4):
            for j in range(10):
                if (i, j) == (0, 0):
                    continue
                base = a[j] * 500**i
                assert base - 0.5 <= c[i][j] <= base * 100 + 0.5 <= 1.25e12 + 0.5
                spread.append(math.log10(c[i][j] / base))
    # 10^U(0, 2): the exponent is uniform on [0, 2]
    assert abs(np.mean(spread) - 1.0) < 0.02 and abs(np.std(spread) - 2 / math.sqrt(12)) < 0.02


def test_scores_of_the_hand_traces() -> None:
    assert ahc058.score(512) == 900_000
    assert ahc058.score(500) == 896_578  # 1e5 * log2(500) = 896578.43
    assert ahc058.score(1) == 0 and ahc058.score(0) == 0
    assert ahc058.round_half_up(2.5) == 3 and ahc058.round_half_up(0.49) == 0


def test_strengthening_0_0_once_then_waiting_ends_with_500_apples() -> None:
    metrics, _, steps = play(
        "contests", {"game": "ahc058"}, 3, lambda obs: 0 if obs["turn"] == 0 else -1
    )
    assert steps == 500 and metrics["score"] == 896_578 and metrics["strengthened"] == 1


def test_greedy_0_0_gives_512_apples_on_any_case() -> None:
    def greedy(obs: dict) -> int:
        return 0 if obs["P"][0][0] + 1 <= obs["apples"] else -1

    for seed in (0, 1):
        metrics, _, _ = play("contests", {"game": "ahc058"}, seed, greedy)
        assert metrics["score"] == 900_000


def test_turns_follow_the_statement_trace() -> None:
    g = game("contests", "ahc058")
    first = g.reset()
    assert first["apples"] == 1 and first["A"][0] == 1 and first["C"][0][0] == 1
    apples = [g.step(a).observation["apples"] for a in (0, -1, 0, -1, 0)]
    assert apples == [1, 2, 2, 4, 4]


def test_level_1_machines_add_level_0_machines_after_production() -> None:
    g = game("contests", "ahc058")
    g.reset()
    g.apples = g.C[1][0] + g.C[0][0]
    g.step(10)  # strengthen 0^1: B[0][0] grows by B[1][0] * P[1][0] = 1 after production
    assert g.B[0][0] == 2 and g.apples == g.C[0][0]
    g.step(0)  # strengthen 0^0 (P = 1): produces A0 * B00 * P00 = 1 * 2 * 1 before B grows again
    assert g.apples == 2 and g.B[0][0] == 3


def test_an_unaffordable_or_unknown_machine_is_invalid_and_ends_the_episode() -> None:
    g = game("contests", "ahc058")
    g.reset()
    with pytest.raises(InvalidAction, match="costs"):
        g.step(39)
    assert g.metrics()["invalid"] == 1.0 and g.metrics()["score"] == 0.0
    for bad in (40, -2, "0", 1.0, None, [0, 0]):
        g = game("contests", "ahc058")
        g.reset()
        with pytest.raises(InvalidAction):
            g.step(bad)


def test_apples_grow_past_int64_as_exact_integers() -> None:
    g = game("contests", "ahc058")
    g.reset()
    g.apples = 2**70
    g.P[0][0] = 5
    obs = g.step(-1).observation
    assert obs["apples"] == 2**70 + 5 and type(obs["apples"]) is int


def test_the_baseline_beats_greedy_0_0_and_replays_identically() -> None:
    first = play("contests", {"game": "ahc058"}, 7, "contests-ahc058")
    again = play("contests", {"game": "ahc058"}, 7, "contests-ahc058")
    assert first == again
    assert first[0]["score"] > 2_000_000
