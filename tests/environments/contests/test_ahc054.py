"""AHC054 Treant's Forest: generator, the walk against a plain re-reading of the rules,
Treant validity, the turn cap."""

from __future__ import annotations

import random
from collections import deque

import numpy as np
import pytest

from evopolicy_mcp.environments.contests import ahc054
from evopolicy_mcp.environments.turns import TurnEpisode
from tests.support.games import InvalidAction, game, play

Cell = tuple[int, int]
UDLR = ((-1, 0), (1, 0), (0, -1), (0, 1))


def reach(
    n: int, start: Cell, free: set[Cell] | None = None, blocked: set[Cell] = frozenset()
) -> dict[Cell, int]:  # type: ignore[assignment]
    """Breadth-first distances from ``start`` over cells inside the grid and not blocked."""
    dist = {start: 0}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        for dr, dc in UDLR:
            cell = (r + dr, c + dc)
            if 0 <= cell[0] < n and 0 <= cell[1] < n and cell not in blocked and cell not in dist:
                dist[cell] = dist[(r, c)] + 1
                queue.append(cell)
    return dist


def reference_walk(
    n: int, trees: set[Cell], flower: Cell, q: list[Cell], plan: dict[int, list[Cell]], cap: int
) -> list[Cell]:
    """The adventurer's positions, simulated straight from the statement's wording (q is
    scanned from its start at every draw)."""
    trees = set(trees)
    pos = (0, n // 2)
    revealed = {pos}
    dest: Cell | None = None
    path = []
    for turn in range(cap):
        trees.update(plan.get(turn, []))
        if pos == flower:
            break
        for dr, dc in UDLR:
            r, c = pos
            while 0 <= r + dr < n and 0 <= c + dc < n:
                r, c = r + dr, c + dc
                revealed.add((r, c))
                if (r, c) in trees:
                    break
        if flower in revealed:
            dest = flower
        walls = revealed & trees
        if dest is not None and pos not in reach(n, dest, blocked=walls):
            dest = None
        if dest is None or (dest in revealed and dest != flower):
            region = reach(n, pos, blocked=walls)
            dest = next(cell for cell in q if cell not in revealed and cell in region)
        dist = reach(n, dest, blocked=walls)
        for dr, dc in UDLR:
            cell = (pos[0] + dr, pos[1] + dc)
            if dist.get(cell, -1) == dist[pos] - 1:
                pos = cell
                break
        path.append(pos)
    return path


def test_generator_follows_the_statement_on_many_seeds() -> None:
    generator_follows_the_statement(range(150))


@pytest.mark.exhaustive
def test_generator_follows_the_statement_on_a_thousand_seeds() -> None:
    generator_follows_the_statement(range(150, 1150))


def generator_follows_the_statement(seeds: range) -> None:
    sizes, fill = set(), []
    for seed in seeds:
        n, trees, flower, q = ahc054.generate(seed)
        sizes.add(n)
        entrance = (0, n // 2)
        assert 20 <= n <= 40 and 1 <= len(trees) <= max(1, n * n // 6)
        assert entrance not in trees and len(set(trees)) == len(trees)
        empty = {(r, c) for r in range(n) for c in range(n)} - set(trees)
        assert set(reach(n, entrance, blocked=set(trees))) == empty  # every empty cell connected
        assert flower in empty and flower[0] + abs(flower[1] - n // 2) >= 5
        assert sorted(q) == sorted(
            r * n + c for r in range(n) for c in range(n) if (r, c) != entrance
        )
        fill.append(len(trees) / (n * n // 6))
    assert len(sizes) > 15 and (len(seeds) < 1000 or len(sizes) == 21)
    assert 0.35 < sum(fill) / len(fill) < 0.6  # K uniform in 0..N^2/6 (fewer when cells would cut)


def test_an_empty_forest_with_the_flower_in_sight_takes_ten_moves() -> None:
    g = game("contests", "ahc054")
    g.load(20, [], (10, 10), list(range(1, 400)))
    g.reset()
    first = g.step([]).observation
    assert first["position"] == [1, 10]
    revealed = {tuple(cell) for cell in first["new_revealed"]}
    assert revealed == ({(0, c) for c in range(20)} | {(r, 10) for r in range(20)}) - {(0, 10)}
    while not g.step([]).terminated:
        pass
    assert g.metrics()["score"] == 10 and g.metrics()["reached"] == 1


def test_ties_go_up_down_left_right_toward_the_first_q_cell() -> None:
    g = game("contests", "ahc054")
    q = [5 * 20 + 5] + [k for k in range(1, 400) if k != 105]
    g.load(20, [], (19, 0), q)
    g.reset()
    assert g.step([]).observation["position"] == [1, 10]  # down and left both close in: down


class RandomTreants:
    """Plants a few random Treants on unseen empty cells now and then, keeping the flower
    reachable (checked here), and records them by turn."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.plan: dict[int, list[Cell]] = {}

    def __call__(self, obs: dict) -> list[list[int]]:
        if "grid" in obs:
            self.n, self.flower = obs["N"], tuple(obs["flower"])
            self.trees = {
                (r, c) for r in range(self.n) for c, ch in enumerate(obs["grid"][r]) if ch == "T"
            }
            self.seen: set[Cell] = set()
        self.seen.update(tuple(cell) for cell in obs["new_revealed"])
        pos = tuple(obs["position"])
        cells: list[Cell] = []
        if self.rng.random() < 0.5:
            for _ in range(self.rng.randrange(1, 12)):
                cell = (self.rng.randrange(self.n), self.rng.randrange(self.n))
                if cell in self.seen or cell in self.trees or cell in cells:
                    continue
                if self.flower in reach(self.n, pos, blocked=self.trees | set(cells) | {cell}):
                    cells.append(cell)
        self.trees.update(cells)
        self.plan[obs["turn"]] = cells
        return [list(cell) for cell in cells]


def walk_matches_the_rules(seed: int) -> None:
    n, trees, flower, q = ahc054.generate(seed)
    g = game("contests", "ahc054", seed=seed)
    treants = RandomTreants(seed)
    obs = g.reset()
    path = []
    while True:
        step = g.step(treants(obs))
        obs = step.observation
        path.append(tuple(obs["position"]))
        if step.terminated or step.truncated:
            break
    cells = [divmod(k, n) for k in q]
    assert path == reference_walk(n, set(trees), flower, cells, treants.plan, len(path) + 1)
    assert g.metrics()["score"] == len(path) and path[-1] == flower


@pytest.mark.parametrize("seed", [0, 1])
def test_the_walk_matches_a_plain_reading_of_the_rules(seed: int) -> None:
    walk_matches_the_rules(seed)


@pytest.mark.exhaustive
@pytest.mark.parametrize("seed", range(2, 30))
def test_the_walk_matches_a_plain_reading_of_the_rules_on_more_forests(seed: int) -> None:
    walk_matches_the_rules(seed)


def forest() -> TurnEpisode:
    g = game("contests", "ahc054")
    g.load(20, [(5, 5)], (10, 10), list(range(1, 400)))
    g.reset()
    return g


@pytest.mark.parametrize(
    ("action", "why"),
    [
        ([[0, 10]], "already revealed"),
        ([[5, 5]], "already holds a tree"),
        ([[3, 3], [3, 3]], "already holds a tree"),
        ([[20, 0]], "outside"),
        ([[-1, 4]], "outside"),
        ([[10, 10]], "cut every path"),
        ([[9, 10], [11, 10], [10, 9], [10, 11]], "cut every path"),
        ([[1, 2, 3]], "expected"),
        ([[1.0, 2]], "expected"),
        ("3 4", "expected a list"),
        (np.array([[1.5, 2.0]]), "expected a list"),
        (None, "expected a list"),
    ],
)
def test_treants_that_break_the_rules_are_invalid(action: object, why: str) -> None:
    g = forest()
    with pytest.raises(InvalidAction, match=why):
        g.step(action)
    assert g.metrics()["invalid"] == 1.0


def test_valid_treants_become_trees_the_adventurer_sees() -> None:
    g = forest()
    obs = g.step(np.array([[4, 10], [2, 9]])).observation  # before any look down the column
    assert g.metrics()["treants"] == 2 and obs["turn"] == 1
    assert [4, 10] in obs["new_revealed"] and [5, 10] not in obs["new_revealed"]
    positions = [tuple(obs["position"])]
    while True:
        step = g.step([])
        positions.append(tuple(step.observation["position"]))
        if step.terminated:
            break
    assert (4, 10) not in positions and (2, 9) not in positions and positions[-1] == (10, 10)
    assert g.metrics()["score"] == len(positions) > 10


def test_the_turn_cap_cuts_the_walk() -> None:
    g = game("contests", "ahc054")
    g.load(20, [], (19, 0), list(range(1, 400)))
    g.cap = 3
    g.reset()
    steps = [g.step([]) for _ in range(3)]
    assert steps[-1].truncated and not steps[-1].terminated and g.metrics()["reached"] == 0


def test_the_baseline_lengthens_the_walk_and_replays_identically() -> None:
    noop = play("contests", {"game": "ahc054"}, 11, lambda obs: [])
    first = play("contests", {"game": "ahc054"}, 11, "contests-ahc054")
    assert first == play("contests", {"game": "ahc054"}, 11, "contests-ahc054")
    assert first[0]["treants"] > 50 and first[0]["score"] > noop[0]["score"] > 0
