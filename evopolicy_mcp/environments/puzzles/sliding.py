"""The sliding-tile puzzle (8-puzzle, 15-puzzle, ...): put the tiles in order.

Tiles 1 .. n^2 - 1 and one blank on an n x n board; each move slides a tile next to
the blank into it. The start is uniform over the solvable arrangements (half of all
permutations are solvable; an unsolvable draw has its first two tiles swapped). The
goal is 1, 2, ... in row-major order with the blank last.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, InvalidAction, Step
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec

PARAMETERS = {
    "size": Param(3, 3, 6, "side of the board"),
    "max_moves": Param(300, 1, 100_000, "moves before the episode is cut"),
}
MOVES = (("up", -1, 0), ("down", 1, 0), ("left", 0, -1), ("right", 0, 1))
ACTIONS = spaces.discrete(
    4,
    [
        f"{i}: move the blank {name} (the tile there slides the other way)"
        for i, (name, _, _) in enumerate(MOVES)
    ],
    description="moving the blank off the board is invalid_action",
)
CHECK = spaces.action_validator(ACTIONS)
METRICS = {
    "score": "solved: manhattan / moves (the start's Manhattan-distance lower bound over the "
    "moves used, at most 1); unsolved: 0",
    "solved": "1 when the tiles are in order",
    "moves": "moves made",
    "manhattan": "sum of the tiles' Manhattan distances to their goal cells at the start",
}


def solvable(tiles: list[int], n: int) -> bool:
    """Whether ``tiles`` (row-major, 0 = blank) can reach the goal."""
    order = [t for t in tiles if t]
    inversions = sum(
        1 for i in range(len(order)) for j in range(i + 1, len(order)) if order[i] > order[j]
    )
    if n % 2:
        return inversions % 2 == 0
    blank_row_from_bottom = n - tiles.index(0) // n
    return (inversions + blank_row_from_bottom) % 2 == 1


def generate(n: int, seed: int) -> list[int]:
    """A uniform solvable start other than the goal."""
    rng = np.random.default_rng(seed)
    goal = [*range(1, n * n), 0]
    while True:
        tiles = rng.permutation(n * n).tolist()
        if not solvable(tiles, n):
            a, b = [k for k in range(len(tiles)) if tiles[k]][:2]
            tiles[a], tiles[b] = tiles[b], tiles[a]
        if tiles != goal:
            return tiles


def manhattan(tiles: list[int], n: int) -> int:
    return sum(
        abs(k // n - (t - 1) // n) + abs(k % n - (t - 1) % n) for k, t in enumerate(tiles) if t
    )


def spec(options: Options) -> EnvSpec:
    n = options.size
    observation = spaces.box(
        0, n * n - 1, (n, n), "uint8", description="[row][col], tile numbers, 0 the blank"
    )
    meta = {"size": n, "goal": "1, 2, ..., n^2 - 1 in row-major order, the blank last"}
    return game_spec(observation, ACTIONS, meta, METRICS, options.max_moves)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        self.n = n = options.size
        self.limit = options.max_moves
        self.tiles = bytearray(generate(n, seed))
        self.goal = bytes(list(range(1, n * n)) + [0])
        self.blank = self.tiles.index(0)
        self.bound = manhattan(list(self.tiles), n)
        self.moves = 0

    def _view(self) -> np.ndarray:
        return np.frombuffer(bytes(self.tiles), dtype=np.uint8).reshape(self.n, self.n)

    def _begin(self) -> np.ndarray:
        return self._view()

    def _play(self, action: Any) -> Step:
        name, dr, dc = MOVES[CHECK(action)]
        n, blank = self.n, self.blank
        r, c = divmod(blank, n)
        r, c = r + dr, c + dc
        if not (0 <= r < n and 0 <= c < n):
            raise InvalidAction(
                f"move {self.moves}: the blank at {divmod(blank, n)} cannot go {name}"
            )
        k = r * n + c
        tiles = self.tiles
        tiles[blank], tiles[k] = tiles[k], 0
        self.blank = k
        self.moves += 1
        solved = tiles == self.goal
        reward = self._score() if solved else 0.0
        return Step(self._view(), reward, solved, not solved and self.moves >= self.limit)

    def _score(self) -> float:
        if self.tiles != self.goal:
            return 0.0
        return min(1.0, self.bound / self.moves) if self.moves else 1.0

    def _metrics(self) -> dict[str, float]:
        return {
            "score": self._score(),
            "solved": 1.0 if self.tiles == self.goal else 0.0,
            "moves": float(self.moves),
            "manhattan": float(self.bound),
        }
