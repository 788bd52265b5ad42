"""Minesweeper, Sudoku and the maze: generators, rules, scores, invalid moves."""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
import pytest

from evopolicy_mcp.adapters.protocol import AdapterError
from evopolicy_mcp.environments.puzzles import maze, minesweeper, sudoku
from tests.support.games import InvalidAction, game, play

# -- Minesweeper ------------------------------------------------------------------------


@pytest.mark.parametrize(("rows", "cols", "mines"), [(9, 9, 10), (16, 16, 40), (16, 30, 99)])
def test_mines_avoid_the_start_block_and_spread_uniformly(rows: int, cols: int, mines: int) -> None:
    hits = np.zeros(rows * cols)
    for seed in range(200):
        field, start = minesweeper.generate(rows, cols, mines, seed)
        assert sum(field) == mines
        r, c = divmod(start, cols)
        assert all(
            not field[k]
            for k in range(rows * cols)
            if abs(k // cols - r) <= 1 and abs(k % cols - c) <= 1
        )
        hits += field
    density = hits / 200
    assert (
        abs(density.mean() - mines / (rows * cols)) < 0.01
        and density.max() < 3 * density.mean() + 0.1
    )


def test_the_start_opens_an_empty_region_and_numbers_count_neighbours() -> None:
    g: Any = game("puzzles", "minesweeper", seed=4)
    view = g.reset()
    field = np.array(g.field).reshape(9, 9)
    padded = np.pad(field, 1)
    shown = view >= 0
    assert view.dtype == np.int8 and view[divmod(g.start, 9)] == 0 and shown.sum() >= 9
    for r, c in zip(*np.nonzero(shown), strict=True):
        assert field[r, c] == 0 and view[r, c] == padded[r : r + 3, c : c + 3].sum()
        if view[r, c] == 0:  # a 0 opens all its neighbours
            assert (view[max(0, r - 1) : r + 2, max(0, c - 1) : c + 2] >= 0).all()


def test_revealing_a_mine_ends_the_game_and_revealing_twice_is_invalid() -> None:
    g: Any = game("puzzles", "minesweeper", seed=1)
    g.reset()
    with pytest.raises(InvalidAction, match="already revealed"):
        g.step(g.start)
    g = game("puzzles", "minesweeper", seed=1)
    g.reset()
    step = g.step(g.field.index(1))
    assert step.terminated and g.metrics()["won"] == 0 and 0 < g.metrics()["score"] < 1


def test_revealing_every_safe_cell_wins_with_score_1() -> None:
    g: Any = game("puzzles", "minesweeper", seed=2)
    view = g.reset()
    for k in range(81):
        if view.reshape(-1)[k] < 0 and not g.field[k]:
            step = g.step(k)
            view = step.observation
    assert step.terminated and g.metrics()["won"] == 1 and g.metrics()["score"] == 1.0


def test_too_many_mines_are_refused() -> None:
    with pytest.raises(AdapterError, match="do not fit"):
        game("puzzles", "minesweeper", rows=4, cols=4, mines=8)


def test_the_minesweeper_baseline_replays_identically() -> None:
    first = play("puzzles", {"game": "minesweeper"}, 3, "puzzles-minesweeper")
    assert first == play("puzzles", {"game": "minesweeper"}, 3, "puzzles-minesweeper")
    assert first[0]["score"] > 0


# -- Sudoku -------------------------------------------------------------------------------


def valid(grid: list[int]) -> bool:
    return all(sorted(grid[k] for k in unit) == list(range(1, 10)) for unit in sudoku.UNITS)


@pytest.mark.parametrize(("clues", "low", "high"), [(36, 36, 36), (28, 28, 28), (17, 20, 28)])
def test_puzzles_have_one_solution_and_the_asked_clues(clues: int, low: int, high: int) -> None:
    for seed in range(8):
        puzzle, solution = sudoku.generate(clues, seed)
        assert valid(solution)
        assert all(p in (0, s) for p, s in zip(puzzle, solution, strict=True))
        assert low <= sum(1 for p in puzzle if p) <= high
        assert sudoku.count_solutions(puzzle) == 1


@pytest.mark.exhaustive
@pytest.mark.parametrize("clues", [36, 17])
def test_puzzles_have_one_solution_on_many_seeds(clues: int) -> None:
    for seed in range(100, 300):
        puzzle, solution = sudoku.generate(clues, seed)
        assert valid(solution) and sudoku.count_solutions(puzzle) == 1


def test_the_solution_counter_counts() -> None:
    assert sudoku.count_solutions([0] * 81, limit=5) == 5
    _, solution = sudoku.generate(30, 1)
    assert sudoku.count_solutions(solution) == 1
    broken = list(solution)
    broken[0], broken[1] = broken[1], broken[0]
    assert sudoku.count_solutions(broken) == 0


def test_writing_the_solution_scores_1_and_mistakes_count_against_it() -> None:
    g: Any = game("puzzles", "sudoku", seed=2)
    g.reset()
    blanks = [k for k in range(81) if not g.clue[k]]
    with pytest.raises(InvalidAction, match="holds the clue"):
        clue = next(k for k in range(81) if g.clue[k])
        _write_on(2, clue)
    wrong = blanks[0]
    g.step([wrong // 9, wrong % 9, g.solution[wrong] % 9 + 1])
    g.step([wrong // 9, wrong % 9, 0])  # erased
    for k in blanks[1:]:
        g.step([k // 9, k % 9, g.solution[k]])
    assert g.metrics()["score"] == pytest.approx((len(blanks) - 1) / len(blanks))
    step = g.step([wrong // 9, wrong % 9, g.solution[wrong]])
    assert step.terminated and step.reward == 1.0 and g.metrics()["solved"] == 1


def _write_on(seed: int, cell: int) -> None:
    g = game("puzzles", "sudoku", seed=seed)
    g.reset()
    g.step([cell // 9, cell % 9, 1])


def test_the_sudoku_baseline_solves_easy_puzzles_and_replays_identically() -> None:
    first = play("puzzles", {"game": "sudoku"}, 1, "puzzles-sudoku")
    assert first == play("puzzles", {"game": "sudoku"}, 1, "puzzles-sudoku")
    assert first[0]["solved"] == 1 and first[0]["writes"] == 81 - 36


# -- Maze ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("rows", "cols"), [(10, 10), (5, 20)])
def test_mazes_are_perfect(rows: int, cols: int) -> None:
    for seed in range(20):
        grid = maze.carve(rows, cols, seed)
        assert grid.shape == (2 * rows + 1, 2 * cols + 1)
        assert grid[0].all() and grid[-1].all() and grid[:, 0].all() and grid[:, -1].all()
        assert not grid[1::2, 1::2].any()  # every room is open
        passages = int((grid == 0).sum()) - rows * cols
        assert passages == rows * cols - 1  # a spanning tree of the rooms
        seen, queue = {(1, 1)}, deque([(1, 1)])
        while queue:
            r, c = queue.popleft()
            for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                if grid[r + dr, c + dc] == 0 and (r + dr, c + dc) not in seen:
                    seen.add((r + dr, c + dc))
                    queue.append((r + dr, c + dc))
        assert len(seen) == int((grid == 0).sum())


def test_the_view_the_walls_and_the_score() -> None:
    g: Any = game("puzzles", "maze", rows=2, cols=2)
    first = g.reset()
    assert first["view"].shape == (5, 5) and first["position"] == [1, 1]
    assert first["view"][:2].all() and first["exit"] == [3, 3] and first["size"] == [5, 5]
    grid = g.padded[2:-2, 2:-2]
    blocked = next(d for d, (_, dr, dc) in enumerate(maze.MOVES) if grid[1 + dr, 1 + dc] == 1)
    with pytest.raises(InvalidAction, match="a wall"):
        g.step(blocked)
    g = game("puzzles", "maze", rows=2, cols=2)
    g.reset()
    assert g.shortest == 4
    path = search(grid, (1, 1), (3, 3))
    for d in path[:-1]:
        assert not g.step(d).terminated
    step = g.step(path[-1])
    assert step.terminated and g.metrics()["score"] == step.reward == 1.0


def search(grid: np.ndarray, start: tuple[int, int], goal: tuple[int, int]) -> list[int]:
    came: dict[tuple[int, int], Any] = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        for d, (_, dr, dc) in enumerate(maze.MOVES):
            n = (cell[0] + dr, cell[1] + dc)
            if grid[n] != 1 and n not in came:
                came[n] = (cell, d)
                queue.append(n)
    path = []
    cell = goal
    while came[cell] is not None:
        cell, d = came[cell]
        path.append(d)
    return path[::-1]


def test_the_maze_baseline_reaches_the_exit_and_replays_identically() -> None:
    first = play("puzzles", {"game": "maze"}, 8, "puzzles-maze")
    assert first == play("puzzles", {"game": "maze"}, 8, "puzzles-maze")
    assert first[0]["reached"] == 1 and 0 < first[0]["score"] <= 1
