"""AHC007 Online MST: generator, scorer on hand-made graphs, the connectivity rule."""

from __future__ import annotations

import numpy as np
import pytest

from evopolicy_mcp.environments.contests import ahc007
from evopolicy_mcp.environments.graphs import UnionFind
from tests.support.games import InvalidAction, game, play


@pytest.mark.parametrize("seed", [0, 1])
def test_generator_follows_the_statement(seed: int) -> None:
    generator_follows_the_statement(seed)


@pytest.mark.exhaustive
@pytest.mark.parametrize("seed", range(2, 40))
def test_generator_follows_the_statement_on_more_seeds(seed: int) -> None:
    generator_follows_the_statement(seed)


def generator_follows_the_statement(seed: int) -> None:
    xy, pairs, d, lengths = ahc007.generate(seed)
    assert xy.shape == (400, 2) and xy.min() >= 0 and xy.max() <= 800
    gaps = ((xy[:, None, :] - xy[None, :, :]) ** 2).sum(axis=2)
    np.fill_diagonal(gaps, 10**9)
    assert gaps.min() > 25
    assert pairs.shape == (1995, 2) and bool((pairs[:, 0] < pairs[:, 1]).all())
    assert len({tuple(p) for p in pairs.tolist()}) == 1995
    exact = np.sqrt(((xy[pairs[:, 0]] - xy[pairs[:, 1]]) ** 2).sum(axis=1))
    assert bool((np.abs(d - exact) <= 0.5).all())
    assert bool(((lengths >= d) & (lengths <= 3 * d)).all())
    # five edge-disjoint spanning trees: 5 * 399 edges, and the first is a minimum one of the
    # complete graph, so the edges' own minimum spanning tree under d weighs as much
    every = [(i, j) for i in range(400) for j in range(i + 1, 400)]
    dist = np.floor(np.sqrt(gaps.astype(float)) + 0.5)
    complete = ahc007.mst_weight(400, every, [int(dist[i, j]) for i, j in every])
    edges = [tuple(p) for p in pairs.tolist()]
    assert ahc007.mst_weight(400, edges, d.tolist()) == complete


def test_true_lengths_are_uniform_between_d_and_3d() -> None:
    fractions = []
    for seed in range(4):
        _, _, d, lengths = ahc007.generate(seed)
        fractions += ((lengths - d) / (2 * d)).tolist()
    assert abs(np.mean(fractions) - 0.5) < 0.02 and abs(np.std(fractions) - 0.2887) < 0.02


def test_score_of_the_three_vertex_graph() -> None:
    pairs, lengths = [(0, 1), (1, 2), (0, 2)], [2, 3, 4]
    best = ahc007.mst_weight(3, pairs, lengths)
    assert best == 5
    assert ahc007.score(best, 5) == 100_000_000
    assert ahc007.score(best, 9) == 55_555_556


def test_adopting_everything_is_valid_and_scores_b_over_a() -> None:
    metrics, _, steps = play("contests", {"game": "ahc007"}, 0, lambda obs: 1)
    g = game("contests", "ahc007")
    assert steps == 1995 and metrics["adopted"] == 1995
    assert metrics["adopted_length"] == sum(g.lengths)
    assert metrics["score"] == round(1e8 * g.mst / sum(g.lengths))


def test_a_disconnected_result_is_invalid_at_the_last_edge() -> None:
    g = game("contests", "ahc007")
    g.reset()
    for _ in range(1994):
        g.step(0)
    with pytest.raises(InvalidAction, match="400 separate components"):
        g.step(0)
    assert g.metrics()["invalid"] == 1.0 and g.metrics()["score"] == 0.0


def test_observations_show_the_edge_and_the_first_the_whole_graph() -> None:
    g = game("contests", "ahc007", seed=5)
    first = g.reset()
    assert first["xy"].shape == (400, 2) and first["edges"].shape == (1995, 2)
    assert (first["u"], first["v"]) == tuple(first["edges"][0].tolist())
    second = g.step(1).observation
    assert second["i"] == 1 and set(second) == {"i", "u", "v", "d", "l"}
    for bad in (2, -1, True, "1"):
        with pytest.raises(InvalidAction):
            _bad(bad)


def _bad(action: object) -> None:
    g = game("contests", "ahc007")
    g.reset()
    g.step(action)


def test_the_baseline_connects_everything_and_replays_identically() -> None:
    first = play("contests", {"game": "ahc007"}, 3, "contests-ahc007")
    assert first == play("contests", {"game": "ahc007"}, 3, "contests-ahc007")
    assert first[0]["adopted"] == 399 and 30_000_000 < first[0]["score"] < 100_000_000
    sets = UnionFind(3)
    assert sets.union(0, 1) and not sets.union(1, 0) and sets.sets == 2
