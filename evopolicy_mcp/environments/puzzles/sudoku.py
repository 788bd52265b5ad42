"""Sudoku: fill a 9 x 9 grid so every row, column and 3 x 3 box holds 1..9 once.

Each puzzle has exactly one solution. The generator makes a random full grid (a
shuffled pattern: digits relabelled, rows within bands, bands, columns within stacks
and stacks permuted, maybe transposed) and then empties cells in random order while
the puzzle keeps a unique solution, down to the variant's number of clues (or until no
more cell can go).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, InvalidAction, Step
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec, int_list

PARAMETERS = {
    "clues": Param(
        36, 17, 80, "clues to leave; fewer are harder (a unique solution may need more)"
    ),
}
ACTIONS = spaces.multi_discrete(
    [9, 9, 10],
    description="[row, col, digit]: write digit 1..9 into an empty or written cell, 0 erases "
    "it; writing on a clue is invalid_action",
)
CHECK = spaces.action_validator(ACTIONS)
OBSERVATION = spaces.box(
    0, 9, (9, 9), "uint8", description="the grid [row][col], 0 empty; clues and your digits"
)
METRICS = {
    "score": "cells not given as clues that hold the solution's digit, over all such cells",
    "solved": "1 when the grid is the solution",
    "clues": "clues given",
    "writes": "actions taken",
}

BOX = [(r // 3) * 3 + c // 3 for r in range(9) for c in range(9)]
UNITS = (
    [[k for k in range(81) if k // 9 == u] for u in range(9)]
    + [[k for k in range(81) if k % 9 == u] for u in range(9)]
    + [[k for k in range(81) if BOX[k] == u] for u in range(9)]
)
ALL = 0x3FE  # bits 1..9


def count_solutions(grid: list[int], limit: int = 2) -> int:
    """Solutions of ``grid`` (81 ints, 0 empty), counting no further than ``limit``."""
    rows, cols, boxes = [0] * 9, [0] * 9, [0] * 9
    empty = []
    for k, d in enumerate(grid):
        if d:
            bit = 1 << d
            r, c, b = k // 9, k % 9, BOX[k]
            if (rows[r] | cols[c] | boxes[b]) & bit:
                return 0
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
        else:
            empty.append(k)

    def search(todo: list[int], want: int) -> int:
        if not todo:
            return 1
        best, best_free, best_n = -1, 0, 10
        for i, k in enumerate(todo):
            free = ALL & ~(rows[k // 9] | cols[k % 9] | boxes[BOX[k]])
            n = free.bit_count()
            if n < best_n:
                best, best_free, best_n = i, free, n
                if n <= 1:
                    break
        if best_n == 0:
            return 0
        k = todo[best]
        rest = todo[:best] + todo[best + 1 :]
        r, c, b = k // 9, k % 9, BOX[k]
        found = 0
        free = best_free
        while free:
            bit = free & -free
            free ^= bit
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
            found += search(rest, want - found)
            rows[r] ^= bit
            cols[c] ^= bit
            boxes[b] ^= bit
            if found >= want:
                break
        return found

    return search(empty, limit)


def generate(clues: int, seed: int) -> tuple[list[int], list[int]]:
    """(puzzle, solution), both 81 ints row-major, the puzzle with 0 for empty cells."""
    rng = np.random.default_rng(seed)
    base = [((r % 3) * 3 + r // 3 + c) % 9 for r in range(9) for c in range(9)]
    digits = (rng.permutation(9) + 1).tolist()
    rows = [
        band * 3 + r for band in rng.permutation(3).tolist() for r in rng.permutation(3).tolist()
    ]
    cols = [
        stack * 3 + c for stack in rng.permutation(3).tolist() for c in rng.permutation(3).tolist()
    ]
    solution = [digits[base[rows[r] * 9 + cols[c]]] for r in range(9) for c in range(9)]
    if rng.random() < 0.5:
        solution = [solution[c * 9 + r] for r in range(9) for c in range(9)]
    puzzle = list(solution)
    given = 81
    for k in rng.permutation(81).tolist():
        if given <= clues:
            break
        digit, puzzle[k] = puzzle[k], 0
        if count_solutions(puzzle) == 1:
            given -= 1
        else:
            puzzle[k] = digit
    return puzzle, solution


def spec(options: Options) -> EnvSpec:
    meta = {"clues": options.clues, "rules": "every row, column and 3 x 3 box holds 1..9 once"}
    blanks = 81 - options.clues
    return game_spec(OBSERVATION, ACTIONS, meta, METRICS, 3 * blanks)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        puzzle, self.solution = generate(options.clues, seed)
        self.grid = bytearray(puzzle)
        self.clue = [d != 0 for d in puzzle]
        self.blanks = 81 - sum(self.clue)
        self.filled = 0  # non-clue cells holding a digit
        self.writes = 0
        self.limit = 3 * (81 - options.clues)

    def _view(self) -> np.ndarray:
        return np.frombuffer(bytes(self.grid), dtype=np.uint8).reshape(9, 9)

    def _begin(self) -> np.ndarray:
        return self._view()

    def _play(self, action: Any) -> Step:
        r, c, digit = int_list(action, (9, 9, 10), CHECK)
        k = r * 9 + c
        if self.clue[k]:
            raise InvalidAction(f"({r}, {c}) holds the clue {self.grid[k]}")
        self.filled += (digit != 0) - (self.grid[k] != 0)
        self.grid[k] = digit
        self.writes += 1
        full = self.filled == self.blanks
        reward = self._score() if full else 0.0
        return Step(self._view(), reward, full, not full and self.writes >= self.limit)

    def _correct(self) -> int:
        grid, solution = self.grid, self.solution
        return sum(1 for k in range(81) if not self.clue[k] and grid[k] == solution[k])

    def _score(self) -> float:
        return self._correct() / self.blanks

    def _metrics(self) -> dict[str, float]:
        return {
            "score": self._score(),
            "solved": 1.0 if list(self.grid) == self.solution else 0.0,
            "clues": float(81 - self.blanks),
            "writes": float(self.writes),
        }
