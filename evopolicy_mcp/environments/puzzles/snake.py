"""Snake: steer a growing snake to the food without hitting a wall or itself.

The snake starts 3 cells long in the middle row, head at the centre, heading right.
Each step it moves one cell; on the food it grows by one and new food appears on a
uniformly chosen free cell. Hitting a wall or its own body (its tail cell is free, since
the tail moves on, unless it just ate) ends the game, and so does starving: 2 x cells
steps without food. Filling the board wins.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, Step
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec

PARAMETERS = {
    "rows": Param(10, 4, 40, "rows of the board"),
    "cols": Param(10, 4, 40, "columns of the board"),
}
HEADINGS = (("up", -1, 0), ("right", 0, 1), ("down", 1, 0), ("left", 0, -1))
ACTIONS = spaces.discrete(
    4,
    [f"{i}: move {name}" for i, (name, _, _) in enumerate(HEADINGS)],
    description="the direction of the next step (absolute); turning back into the neck is a "
    "collision",
)
CHECK = spaces.action_validator(ACTIONS)
FOOD = -1
START = 3
METRICS = {
    "score": "food eaten / (cells - 3): 1 = the board is full",
    "eaten": "food eaten",
    "length": "final length of the snake",
    "steps": "steps taken",
    "died": "1 when the snake hit a wall or itself, 0 when it won, starved or was cut",
}


def spec(options: Options) -> EnvSpec:
    rows, cols = options.rows, options.cols
    cells = rows * cols
    observation = spaces.box(
        FOOD,
        cells,
        (rows, cols),
        "int16",
        description="[row][col]: 0 free, -1 food, k > 0 a body cell that leaves after k more "
        "steps without eating (1 the tail, the length at the head)",
    )
    meta = {"rows": rows, "cols": cols, "start_length": START, "starve_after": 2 * cells}
    return game_spec(observation, ACTIONS, meta, METRICS, cells * 2 * cells)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        self.rows, self.cols = rows, cols = options.rows, options.cols
        self.cells = rows * cols
        self.rng = random.Random(seed)
        self.board = np.zeros((rows, cols), dtype=np.int16)
        r, c = rows // 2, cols // 2
        for k in range(START):
            self.board[r, c - START + 1 + k] = k + 1
        self.head = (r, c)
        self.length = START
        self.eaten = self.steps = self.hungry = 0
        self.died = False
        self._food()

    def _food(self) -> None:
        free = np.flatnonzero(self.board.reshape(-1) == 0)
        k = int(free[int(self.rng.random() * len(free))])
        self.board[divmod(k, self.cols)] = FOOD

    def _begin(self) -> np.ndarray:
        return self.board.copy()

    def _play(self, action: Any) -> Step:
        _, dr, dc = HEADINGS[CHECK(action)]
        r, c = self.head[0] + dr, self.head[1] + dc
        board = self.board
        self.steps += 1
        if not (0 <= r < self.rows and 0 <= c < self.cols):
            return self._die()
        there = int(board[r, c])
        if there == FOOD:
            self.length += 1
            self.eaten += 1
            self.hungry = 0
            board[r, c] = self.length
            self.head = (r, c)
            if self.length == self.cells:
                return Step(board.copy(), 1.0, True, False)
            self._food()
            return Step(board.copy(), 1.0, False, False)
        if there > 1:
            return self._die()
        board[board > 0] -= 1
        board[r, c] = self.length
        self.head = (r, c)
        self.hungry += 1
        return Step(board.copy(), 0.0, self.hungry >= 2 * self.cells, False)

    def _die(self) -> Step:
        self.died = True
        return Step(self.board.copy(), 0.0, True, False)

    def _metrics(self) -> dict[str, float]:
        return {
            "score": self.eaten / (self.cells - START),
            "eaten": float(self.eaten),
            "length": float(self.length),
            "steps": float(self.steps),
            "died": 1.0 if self.died else 0.0,
        }
