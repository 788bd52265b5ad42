"""Maze: find the exit of an unknown perfect maze, seeing only a few cells around you.

A maze of rows x cols rooms is drawn on a (2 rows + 1) x (2 cols + 1) grid of cells:
rooms at odd coordinates, walls between them, carved by a randomised depth-first search
(one path between any two rooms). You start in the top-left room (1, 1); the exit is the
bottom-right room. Each step moves one grid cell; you see the 5 x 5 cells centred on you.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, InvalidAction, Step
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec

PARAMETERS = {
    "rows": Param(10, 2, 100, "rooms down"),
    "cols": Param(10, 2, 100, "rooms across"),
}
RADIUS = 2
WALL, FREE, EXIT = 1, 0, 2
MOVES = (("up", -1, 0), ("right", 0, 1), ("down", 1, 0), ("left", 0, -1))
ACTIONS = spaces.discrete(
    4,
    [f"{i}: step {name}" for i, (name, _, _) in enumerate(MOVES)],
    description="stepping into a wall is invalid_action",
)
CHECK = spaces.action_validator(ACTIONS)
METRICS = {
    "score": "reached the exit: shortest path length / steps taken (1 = no detour); else 0",
    "reached": "1 when the exit was reached",
    "steps": "steps taken",
    "shortest": "length of the shortest path from start to exit, in cells",
}


def carve(rows: int, cols: int, seed: int) -> np.ndarray:
    """The grid (uint8, 1 = wall) of a perfect maze by randomised depth-first search."""
    rng = np.random.default_rng(seed)
    grid = np.ones((2 * rows + 1, 2 * cols + 1), dtype=np.uint8)
    seen = np.zeros((rows, cols), dtype=bool)
    stack = [(0, 0)]
    seen[0, 0] = True
    grid[1, 1] = FREE
    while stack:
        r, c = stack[-1]
        options = [
            (r + dr, c + dc)
            for _, dr, dc in MOVES
            if 0 <= r + dr < rows and 0 <= c + dc < cols and not seen[r + dr, c + dc]
        ]
        if not options:
            stack.pop()
            continue
        nr, nc = options[int(rng.integers(len(options)))]
        seen[nr, nc] = True
        grid[2 * nr + 1, 2 * nc + 1] = FREE
        grid[r + nr + 1, c + nc + 1] = FREE
        stack.append((nr, nc))
    return grid


def shortest(grid: np.ndarray, start: tuple[int, int], goal: tuple[int, int]) -> int:
    dist = {start: 0}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        if (r, c) == goal:
            return dist[goal]
        for _, dr, dc in MOVES:
            n = (r + dr, c + dc)
            if grid[n] != WALL and n not in dist:
                dist[n] = dist[(r, c)] + 1
                queue.append(n)
    raise ValueError("the exit cannot be reached")


def spec(options: Options) -> EnvSpec:
    rows, cols = options.rows, options.cols
    side = 2 * RADIUS + 1
    observation = spaces.dict_of(
        {
            "view": spaces.box(
                0,
                2,
                (side, side),
                "uint8",
                description=f"the {side} x {side} cells centred on you [row][col]: 0 free, "
                "1 wall (also outside the grid), 2 the exit",
            ),
            "position": spaces.multi_discrete(
                [2 * rows + 1, 2 * cols + 1], description="your [row, col] on the grid"
            ),
        },
        description=f"the first observation also holds size [{2 * rows + 1}, {2 * cols + 1}], "
        "start and exit ([row, col])",
    )
    cells = (2 * rows + 1) * (2 * cols + 1)
    meta = {"rooms": [rows, cols], "grid": [2 * rows + 1, 2 * cols + 1], "view_radius": RADIUS}
    return game_spec(observation, ACTIONS, meta, METRICS, 4 * cells)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        rows, cols = options.rows, options.cols
        grid = carve(rows, cols, seed)
        self.exit = (2 * rows - 1, 2 * cols - 1)
        self.shortest = shortest(grid, (1, 1), self.exit)
        grid[self.exit] = EXIT
        self.padded = np.pad(grid, RADIUS, constant_values=WALL)
        self.open = (grid != WALL).reshape(-1).tolist()
        self.width = grid.shape[1]
        self.size = list(grid.shape)
        self.r, self.c = 1, 1
        self.steps = 0
        self.limit = 4 * grid.size

    def _observation(self) -> dict[str, Any]:
        r, c, side = self.r, self.c, 2 * RADIUS + 1
        return {"view": self.padded[r : r + side, c : c + side].copy(), "position": [r, c]}

    def _begin(self) -> dict[str, Any]:
        obs = self._observation()
        obs.update(size=self.size, start=[1, 1], exit=list(self.exit))
        return obs

    def _play(self, action: Any) -> Step:
        name, dr, dc = MOVES[CHECK(action)]
        r, c = self.r + dr, self.c + dc
        if not self.open[r * self.width + c]:
            raise InvalidAction(f"step {self.steps}: a wall is {name} of ({self.r}, {self.c})")
        self.r, self.c = r, c
        self.steps += 1
        if (r, c) == self.exit:
            return Step(self._observation(), self.shortest / self.steps, True, False)
        return Step(self._observation(), 0.0, False, self.steps >= self.limit)

    def _metrics(self) -> dict[str, float]:
        reached = (self.r, self.c) == self.exit
        return {
            "score": self.shortest / self.steps if reached else 0.0,
            "reached": 1.0 if reached else 0.0,
            "steps": float(self.steps),
            "shortest": float(self.shortest),
        }
