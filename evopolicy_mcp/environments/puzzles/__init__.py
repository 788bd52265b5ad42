"""Puzzles and combinatorial optimisation as episodes, in plain Python and numpy.

``make_adapter()`` serves them as adapter ``puzzles`` with parameter ``game`` (and the
game's own parameters: sizes, difficulty). Each game generates its instance from the
episode seed and scores it on a scale that compares across instances: against a bound
(sliding tiles, bin packing, knapsack, job shop, maze), a reference heuristic computed at
the end of the episode (TSP, CVRP), or the game's own points.
"""

from __future__ import annotations

from evopolicy_mcp.environments.turns import GameAdapter

__all__ = ["GAMES", "make_adapter"]

GAMES = {
    name: f"evopolicy_mcp.environments.puzzles.{module}"
    for name, module in (
        ("2048", "g2048"),
        ("binpacking", "binpacking"),
        ("cube", "cube"),
        ("cvrp", "cvrp"),
        ("jobshop", "jobshop"),
        ("knapsack", "knapsack"),
        ("maze", "maze"),
        ("minesweeper", "minesweeper"),
        ("sliding", "sliding"),
        ("snake", "snake"),
        ("sudoku", "sudoku"),
        ("tetris", "tetris"),
        ("tsp", "tsp"),
    )
}


def make_adapter() -> GameAdapter:
    return GameAdapter("puzzles", GAMES, example="2048")
