"""2048: slide the tiles, merge equal ones, reach big tiles.

Gabriele Cirulli's game (2014, https://github.com/gabrielecirulli/2048 for the rules):
every move slides all tiles as far as they go in one direction; two equal tiles that
meet merge into their sum once per move, and the sum is added to the score; then a 2
(probability 0.9) or a 4 appears on a uniformly chosen empty cell. The board starts
with two such tiles.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, InvalidAction, Step
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec

PARAMETERS = {
    "size": Param(4, 3, 6, "side of the board"),
    "max_moves": Param(20_000, 1, 1_000_000, "moves before the episode is cut"),
}
DIRECTIONS = ("up", "right", "down", "left")
ACTIONS = spaces.discrete(
    4,
    [f"{i}: slide {d}" for i, d in enumerate(DIRECTIONS)],
    description="a move that changes nothing on the board is invalid_action",
)
CHECK = spaces.action_validator(ACTIONS)
VALUES = np.array([0] + [1 << e for e in range(1, 40)], dtype=np.int64)
METRICS = {
    "score": "the game's points: the sum of every merged tile's new value",
    "max_tile": "largest tile on the board at the end",
    "moves": "moves made",
}

# line (exponents, slid toward index 0) -> (new line, points); shared by every episode
_LINES: dict[bytes, tuple[bytes, int]] = {}


def slide(line: bytes) -> tuple[bytes, int]:
    """One line of exponents (0 = empty) slid and merged toward its start."""
    done = _LINES.get(line)
    if done is not None:
        return done
    tiles = [e for e in line if e]
    out: list[int] = []
    points = 0
    k = 0
    while k < len(tiles):
        if k + 1 < len(tiles) and tiles[k] == tiles[k + 1]:
            out.append(tiles[k] + 1)
            points += 1 << (tiles[k] + 1)
            k += 2
        else:
            out.append(tiles[k])
            k += 1
    result = bytes(out + [0] * (len(line) - len(out))), points
    _LINES[line] = result
    return result


_WAYS: dict[int, list[list[slice]]] = {}


def _ways(n: int) -> list[list[slice]]:
    """Per direction, the slices of the board's lines, each read toward the side slid to."""
    ways = _WAYS.get(n)
    if ways is None:
        up = [slice(k, None, n) for k in range(n)]
        right = [slice(k * n + n - 1, k * n - 1 if k else None, -1) for k in range(n)]
        down = [slice(n * n - n + k, k - 1 if k else None, -n) for k in range(n)]
        left = [slice(k * n, k * n + n) for k in range(n)]
        ways = _WAYS[n] = [up, right, down, left]
    return ways


def move(board: bytearray, n: int, direction: int) -> int:
    """Apply ``direction`` (0..3 = up right down left) to the row-major exponent ``board``
    in place; return the points, or -1 when nothing moved (the board is unchanged)."""
    points, moved = 0, False
    for where in _ways(n)[direction]:
        line = bytes(board[where])
        new, gained = _LINES.get(line) or slide(line)
        if new != line:
            board[where] = new
            points += gained
            moved = True
    return points if moved else -1


def stuck(board: bytearray, n: int) -> bool:
    if 0 in board:
        return False
    for r in range(n):
        for c in range(n):
            e = board[r * n + c]
            if (c + 1 < n and board[r * n + c + 1] == e) or (
                r + 1 < n and board[r * n + n + c] == e
            ):
                return False
    return True


def spec(options: Options) -> EnvSpec:
    n = options.size
    observation = spaces.box(
        0,
        np.inf,
        (n, n),
        "int64",
        description="the board [row][col], row 0 at the top; tile values (2, 4, 8, ...), 0 empty",
    )
    meta = {"size": n, "spawn": "2 with probability 0.9, else 4, on a uniform empty cell"}
    return game_spec(observation, ACTIONS, meta, METRICS, options.max_moves)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        self.n = options.size
        self.limit = options.max_moves
        self.rng = random.Random(seed)
        self.board = bytearray(self.n * self.n)
        self.points = self.moves = 0
        self._spawn()
        self._spawn()

    def _spawn(self) -> None:
        board = self.board
        rng = self.rng
        k = -1
        for _ in range(1 + int(rng.random() * board.count(0))):
            k = board.find(0, k + 1)
        board[k] = 1 if rng.random() < 0.9 else 2

    def _view(self) -> np.ndarray:
        n = self.n
        return VALUES.take(np.frombuffer(self.board, dtype=np.uint8)).reshape(n, n)

    def _begin(self) -> np.ndarray:
        return self._view()

    def _play(self, action: Any) -> Step:
        direction = CHECK(action)
        gained = move(self.board, self.n, direction)
        if gained < 0:
            raise InvalidAction(
                f"move {self.moves}: sliding {DIRECTIONS[direction]} changes nothing"
            )
        self.points += gained
        self.moves += 1
        self._spawn()
        over = stuck(self.board, self.n)
        return Step(self._view(), float(gained), over, not over and self.moves >= self.limit)

    def _metrics(self) -> dict[str, float]:
        return {
            "score": float(self.points),
            "max_tile": float(1 << max(self.board)),
            "moves": float(self.moves),
        }
