"""Bin packing, knapsack, job shop, TSP and CVRP: generators, rules, bounds and references."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from evopolicy_mcp.adapters.protocol import AdapterError
from evopolicy_mcp.environments.puzzles import binpacking, jobshop, knapsack, routing
from tests.support.games import InvalidAction, game, options, play

# -- bin packing -----------------------------------------------------------------------


def test_item_sizes_are_uniform_in_the_falkenauer_range() -> None:
    sizes = sum((binpacking.generate(options(binpacking), seed) for seed in range(100)), [])
    assert min(sizes) == 20 and max(sizes) == 100 and abs(np.mean(sizes) - 60) < 1


def test_packing_rules_and_the_lower_bound_score() -> None:
    g: Any = game("puzzles", "binpacking", items=4, capacity=10, low=3, high=7)
    g.sizes = [6, 4, 7, 3]
    g.reset()
    with pytest.raises(InvalidAction, match="does not exist"):
        fresh = game("puzzles", "binpacking", items=4, capacity=10, low=3, high=7)
        fresh.reset()
        fresh.step(1)
    assert g.step(0).observation["loads"].tolist() == [6]
    g.step(0)  # 4 fits: 10
    obs = g.step(1).observation
    assert obs["loads"].tolist() == [10, 7] and obs["item"] == 3
    step = g.step(1)
    assert step.terminated and g.metrics() == {
        "score": 1.0, "bins": 2.0, "lower_bound": 2.0, "invalid": 0.0
    }  # fmt: skip
    g = game("puzzles", "binpacking", items=4, capacity=10, low=3, high=7)
    g.sizes = [6, 5, 7, 3]
    g.reset()
    g.step(0)
    with pytest.raises(InvalidAction, match="does not fit"):
        g.step(0)


def test_sizes_must_fit_a_bin() -> None:
    with pytest.raises(AdapterError, match="low <= high <= capacity"):
        game("puzzles", "binpacking", capacity=50)


# -- knapsack ------------------------------------------------------------------------------


def test_the_optimum_matches_brute_force() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        w = rng.integers(1, 30, size=10).tolist()
        v = rng.integers(1, 30, size=10).tolist()
        room = int(rng.integers(10, 80))
        best = max(
            sum(v[i] for i in pick)
            for r in range(11)
            for pick in itertools.combinations(range(10), r)
            if sum(w[i] for i in pick) <= room
        )
        assert knapsack.optimum(w, v, room) == best


def test_items_take_capacity_and_the_score_compares_with_the_optimum() -> None:
    weights, values = knapsack.generate(50, 3)
    assert all(1 <= x <= 100 for x in weights + values)
    g: Any = game("puzzles", "knapsack", seed=3)
    first = g.reset()
    assert first["capacity"] == 625 == knapsack.capacity(50) and first["weight"] == weights[0]
    g.room = 0
    with pytest.raises(InvalidAction, match="only 0 capacity"):
        g.step(1)
    metrics, _, steps = play("puzzles", {"game": "knapsack"}, 3, lambda obs: 0)
    assert steps == 50 and metrics["score"] == 0.0 and metrics["optimum"] > 0


def test_the_knapsack_baseline_scores_below_the_optimum() -> None:
    first = play("puzzles", {"game": "knapsack"}, 4, "puzzles-knapsack")
    assert first == play("puzzles", {"game": "knapsack"}, 4, "puzzles-knapsack")
    assert 0.5 < first[0]["score"] <= 1.0 and first[0]["value"] <= first[0]["optimum"]


# -- job shop --------------------------------------------------------------------------------


def test_instances_follow_taillard() -> None:
    for seed in range(20):
        order, times = jobshop.generate(6, 5, seed)
        assert times.min() >= 1 and times.max() <= 99
        assert all(sorted(row) == list(range(5)) for row in order.tolist())


def test_operations_start_when_job_and_machine_are_free() -> None:
    g: Any = game("puzzles", "jobshop", jobs=2, machines=2)
    g.load(np.array([[0, 1], [0, 1]]), np.array([[3, 2], [4, 1]]))
    g.reset()
    g.step(1)  # job 1 on machine 0: 0..4
    obs = g.step(0).observation  # job 0 on machine 0 after it: 4..7
    assert obs["job_ready"].tolist() == [7, 4] and obs["machine_ready"].tolist() == [7, 0]
    g.step(0)  # job 0 on machine 1: 7..9
    with pytest.raises(InvalidAction, match="no operation left"):
        g.step(0)


def test_the_makespan_score_uses_the_job_and_machine_bound() -> None:
    g: Any = game("puzzles", "jobshop", jobs=2, machines=2)
    g.load(np.array([[0, 1], [1, 0]]), np.array([[3, 2], [4, 1]]))
    assert g.bound == 6  # jobs take 5 each; machine 1 is busy 2 + 4
    g.reset()
    for j in (0, 0, 1, 1):  # job 0: 0..3 then 3..5; job 1 waits for machine 1: 5..9, 9..10
        step = g.step(j)
    assert step.terminated and g.makespan() == 10 and step.reward == pytest.approx(0.6)
    g = game("puzzles", "jobshop", jobs=2, machines=2)
    g.load(np.array([[0, 1], [1, 0]]), np.array([[3, 2], [4, 1]]))
    g.reset()
    for j in (0, 1, 0, 1):  # machine 0: 0..3 then 4..5; machine 1: 0..4 then 4..6
        step = g.step(j)
    assert g.makespan() == 6 and step.reward == 1.0 and g.metrics()["score"] == 1.0


def test_the_jobshop_baseline_replays_identically() -> None:
    first = play("puzzles", {"game": "jobshop"}, 2, "puzzles-jobshop")
    assert first == play("puzzles", {"game": "jobshop"}, 2, "puzzles-jobshop")
    assert 0.3 < first[0]["score"] <= 1.0


# -- TSP and CVRP ----------------------------------------------------------------------------


def test_two_opt_gives_a_tour_no_single_exchange_improves() -> None:
    points = np.random.default_rng(5).random((30, 2))
    dist = routing.distances(points)
    tour = routing.two_opt_tour(dist)
    assert sorted(tour) == list(range(30)) and tour[0] == 0
    n = len(tour)
    for i in range(n - 1):
        for j in range(i + 2, n if i else n - 1):
            a, b, c, d = tour[i], tour[i + 1], tour[j], tour[(j + 1) % n]
            assert dist[a, b] + dist[c, d] <= dist[a, c] + dist[b, d] + 1e-9
    square = np.array([[0, 0], [1, 1], [1, 0], [0, 1]], dtype=float)
    assert (
        routing.length(routing.distances(square), routing.two_opt_tour(routing.distances(square)))
        == 4
    )


def test_a_tour_visits_each_city_once_and_closes() -> None:
    g: Any = game("puzzles", "tsp", cities=5)
    first = g.reset()
    assert first["coords"].shape == (5, 2) and first["visited"].tolist() == [1, 0, 0, 0, 0]
    with pytest.raises(InvalidAction, match="visited already"):
        g.step(0)
    g = game("puzzles", "tsp", cities=5)
    g.reset()
    for city in (1, 2, 3):
        g.step(city)
    step = g.step(4)
    assert step.terminated
    assert g.metrics()["length"] == pytest.approx(routing.length(g.dist, [0, 1, 2, 3, 4]))
    assert step.reward == pytest.approx(g.metrics()["reference"] / g.metrics()["length"])


def test_savings_routes_respect_capacity_and_serve_everyone() -> None:
    for seed in range(10):
        g: Any = game("puzzles", "cvrp", seed=seed, customers=30)
        routes = routing.savings_routes(g.dist, g.demand, g.capacity)
        assert sorted(k for r in routes for k in r) == list(range(1, 31))
        assert all(sum(g.demand[k] for k in r) <= g.capacity for r in routes)
        assert len(routes) >= -(-sum(g.demand) // g.capacity)


def test_vehicle_rules() -> None:
    g: Any = game("puzzles", "cvrp", customers=3)
    g.demand = [0, 20, 15, 5]
    g.reset()
    with pytest.raises(InvalidAction, match="at the depot already"):
        g.step(0)
    g = game("puzzles", "cvrp", customers=3)
    g.demand = [0, 20, 15, 5]
    g.reset()
    g.step(1)
    with pytest.raises(InvalidAction, match="needs 15"):
        g.step(2)
    g = game("puzzles", "cvrp", customers=3)
    g.demand = [0, 20, 15, 5]
    g.reset()
    for stop in (1, 3, 0):
        assert not g.step(stop).terminated
    step = g.step(2)
    assert step.terminated and g.metrics()["trips"] == 2
    assert g.metrics()["length"] == pytest.approx(
        routing.length(g.dist, [0, 1, 3]) + routing.length(g.dist, [0, 2])
    )
    with pytest.raises(InvalidAction, match="served already"):
        h: Any = game("puzzles", "cvrp", customers=3)
        h.reset()
        h.step(3)
        h.step(3)


@pytest.mark.parametrize("name", ["tsp", "cvrp", "binpacking"])
def test_routing_and_packing_baselines_score_and_replay_identically(name: str) -> None:
    first = play("puzzles", {"game": name}, 9, f"puzzles-{name}")
    assert first == play("puzzles", {"game": name}, 9, f"puzzles-{name}")
    assert 0.5 < first[0]["score"] < 1.2
