"""Minesweeper: reveal every safe cell of a hidden mine field.

The classic game (Microsoft Minesweeper's board sizes): mines lie uniformly on the
cells outside the 3 x 3 block around a start cell, which is revealed for free (so
the game opens with an empty region). Revealing a cell shows how many of its 8
neighbours are mines; a 0 opens its neighbours too. Revealing a mine ends the game.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import AdapterError, EnvSpec, InvalidAction, Step
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec

PARAMETERS = {
    "rows": Param(9, 4, 40, "rows of the field"),
    "cols": Param(9, 4, 40, "columns of the field"),
    "mines": Param(10, 1, 1000, "mines; at most rows * cols - 9"),
}
HIDDEN = 255  # shows as -1 in the int8 observation
METRICS = {
    "score": "safe cells revealed / all safe cells (1 = won)",
    "won": "1 when every safe cell was revealed",
    "revealed": "safe cells revealed",
}


def _neighbours(rows: int, cols: int) -> list[list[int]]:
    out = []
    for r in range(rows):
        for c in range(cols):
            out.append(
                [
                    rr * cols + cc
                    for rr in range(max(0, r - 1), min(rows, r + 2))
                    for cc in range(max(0, c - 1), min(cols, c + 2))
                    if (rr, cc) != (r, c)
                ]
            )
    return out


def generate(rows: int, cols: int, mines: int, seed: int) -> tuple[list[int], int]:
    """Mine flags (row-major) and the start cell: mines uniform outside its 3 x 3 block."""
    rng = np.random.default_rng(seed)
    start = int(rng.integers(rows * cols))
    r, c = divmod(start, cols)
    free = [
        k for k in range(rows * cols) if not (abs(k // cols - r) <= 1 and abs(k % cols - c) <= 1)
    ]
    field = [0] * (rows * cols)
    for k in rng.choice(len(free), size=mines, replace=False).tolist():
        field[free[k]] = 1
    return field, start


def spec(options: Options) -> EnvSpec:
    rows, cols, mines = options.rows, options.cols, options.mines
    if mines > rows * cols - 9:
        raise AdapterError(
            f"minesweeper: {mines} mines do not fit {rows} x {cols} with a free start"
        )
    actions = spaces.discrete(
        rows * cols,
        description=f"reveal cell row * {cols} + col; revealing a revealed cell is invalid_action",
    )
    observation = spaces.box(
        -1,
        8,
        (rows, cols),
        "int8",
        description="[row][col]: -1 hidden, 0..8 mines among the 8 neighbours of a revealed cell",
    )
    meta = {
        "rows": rows,
        "cols": cols,
        "mines": mines,
        "start": "revealed for free, no mine in its 3 x 3 block",
    }
    return game_spec(observation, actions, meta, METRICS, rows * cols - mines)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        spec(options)  # checks that the mines fit
        self.rows, self.cols = options.rows, options.cols
        self.cells = self.rows * self.cols
        self.field, self.start = generate(self.rows, self.cols, options.mines, seed)
        self.near = _neighbours(self.rows, self.cols)
        self.counts = [sum(self.field[n] for n in near) for near in self.near]
        self.safe = self.cells - options.mines
        self.view = bytearray([HIDDEN]) * self.cells
        self.revealed = 0
        self.lost = False
        self.check = spaces.action_validator(spaces.discrete(self.cells))

    def _open(self, k: int) -> None:
        view, counts, near = self.view, self.counts, self.near
        view[k] = counts[k]
        self.revealed += 1
        stack = [k] if counts[k] == 0 else []
        while stack:
            for n in near[stack.pop()]:
                if view[n] == HIDDEN:
                    view[n] = counts[n]
                    self.revealed += 1
                    if counts[n] == 0:
                        stack.append(n)

    def _view(self) -> np.ndarray:
        return np.frombuffer(bytes(self.view), dtype=np.int8).reshape(self.rows, self.cols)

    def _begin(self) -> np.ndarray:
        self._open(self.start)
        return self._view()

    def _play(self, action: Any) -> Step:
        k = self.check(action)
        if self.view[k] != HIDDEN:
            raise InvalidAction(f"cell ({k // self.cols}, {k % self.cols}) is already revealed")
        if self.field[k]:
            self.lost = True
            return Step(self._view(), -1.0, True, False)
        before = self.revealed
        self._open(k)
        won = self.revealed == self.safe
        return Step(self._view(), (self.revealed - before) / self.safe, won, False)

    def _metrics(self) -> dict[str, float]:
        return {
            "score": self.revealed / self.safe,
            "won": 1.0 if self.revealed == self.safe else 0.0,
            "revealed": float(self.revealed),
        }
