"""Rubik's cube (3 x 3 x 3): undo a scramble of a set number of face turns.

The 54 stickers are numbered face by face in the order U R F D L B (up, right, front,
down, left, back), 9 per face in rows as you look at that face from outside: U with
the back edge at the top, D with the front edge at the top, F R B L with U at the
top. A sticker's colour is the index of the face it belongs to when solved. The
moves are the 18 face turns of the half-turn metric: X (a quarter turn clockwise as
you look at face X), X2 and X'. A scramble of depth d is d random turns, never the
same face twice in a row and never D after U, L after R or B after F (those commute).
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, Step
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec

PARAMETERS = {
    "depth": Param(8, 1, 100, "random face turns in the scramble"),
    "max_moves": Param(200, 1, 10_000, "moves before the episode is cut"),
}
FACES = "URFDLB"
NORMALS = {
    "U": (0, 1, 0),
    "R": (1, 0, 0),
    "F": (0, 0, 1),
    "D": (0, -1, 0),
    "L": (-1, 0, 0),
    "B": (0, 0, -1),
}
# (right, down) directions of each face's sticker rows, seen from outside
LAYOUT = {
    "U": ((1, 0, 0), (0, 0, 1)),
    "R": ((0, 0, -1), (0, -1, 0)),
    "F": ((1, 0, 0), (0, -1, 0)),
    "D": ((1, 0, 0), (0, 0, -1)),
    "L": ((0, 0, 1), (0, -1, 0)),
    "B": ((-1, 0, 0), (0, -1, 0)),
}
MOVE_NAMES = [f + s for f in FACES for s in ("", "2", "'")]
ACTIONS = spaces.discrete(
    18,
    [f"{i}: {name}" for i, name in enumerate(MOVE_NAMES)],
    description="3 * face + k, faces U R F D L B; k 0 a clockwise quarter turn, 1 a half "
    "turn, 2 counter-clockwise",
)
CHECK = spaces.action_validator(ACTIONS)
OBSERVATION = spaces.box(
    0,
    5,
    (6, 3, 3),
    "uint8",
    description="[face][row][col] colours, faces U R F D L B; colour c is face c's colour",
)
METRICS = {
    "score": "solved: min(1, depth / moves); unsolved: 0",
    "solved": "1 when every face shows one colour",
    "moves": "moves made",
}

Vector = tuple[int, int, int]


def _dot(a: Vector, b: Vector) -> int:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _turn(v: Vector, a: Vector) -> Vector:
    """``v`` turned a quarter clockwise about axis ``a`` (seen from the tip of ``a``)."""
    cross = (a[1] * v[2] - a[2] * v[1], a[2] * v[0] - a[0] * v[2], a[0] * v[1] - a[1] * v[0])
    along = _dot(a, v)
    return (a[0] * along - cross[0], a[1] * along - cross[1], a[2] * along - cross[2])


def _stickers() -> list[tuple[Vector, Vector]]:
    """(position, normal) of each sticker in index order."""
    out = []
    for face in FACES:
        normal = NORMALS[face]
        right, down = LAYOUT[face]
        for row in (-1, 0, 1):
            for col in (-1, 0, 1):
                pos = tuple(normal[i] + col * right[i] + row * down[i] for i in range(3))
                out.append((pos, normal))
    return out  # type: ignore[return-value]


def _permutations() -> list[tuple[int, ...]]:
    """For each of the 18 moves, P with new[i] = old[P[i]]."""
    stickers = _stickers()
    where = {s: i for i, s in enumerate(stickers)}
    quarter = []
    for face in FACES:
        axis = NORMALS[face]
        perm = list(range(54))
        for i, (pos, normal) in enumerate(stickers):
            if _dot(pos, axis) == 1:
                perm[where[(_turn(pos, axis), _turn(normal, axis))]] = i
        quarter.append(perm)
    moves = []
    for perm in quarter:
        twice = [perm[perm[i]] for i in range(54)]
        thrice = [perm[twice[i]] for i in range(54)]
        moves += [tuple(perm), tuple(twice), tuple(thrice)]
    return moves


PERMUTATIONS = _permutations()
MOVERS = [itemgetter(*p) for p in PERMUTATIONS]
SOLVED = bytes(i // 9 for i in range(54))


def apply(state: bytes, move: int) -> bytes:
    return bytes(MOVERS[move](state))


def scramble(depth: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    moves: list[int] = []
    last = -1
    while len(moves) < depth:
        face = int(rng.integers(6))
        if face == last or (last >= 0 and face % 3 == last % 3 and face > last):
            continue
        moves.append(face * 3 + int(rng.integers(3)))
        last = face
    return moves


def spec(options: Options) -> EnvSpec:
    meta = {
        "depth": options.depth,
        "moves": MOVE_NAMES,
        "faces": FACES,
        "permutations": [list(p) for p in PERMUTATIONS],
        "permutation_note": "after move m, sticker i (flat index 0..53) shows the colour that "
        "sticker permutations[m][i] showed before",
    }
    return game_spec(OBSERVATION, ACTIONS, meta, METRICS, options.max_moves)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        self.depth = options.depth
        self.limit = options.max_moves
        state = SOLVED
        for m in scramble(self.depth, seed):
            state = apply(state, m)
        self.state = state
        self.moves = 0

    def _view(self) -> np.ndarray:
        return np.frombuffer(self.state, dtype=np.uint8).reshape(6, 3, 3)

    def _begin(self) -> np.ndarray:
        return self._view()

    def _play(self, action: Any) -> Step:
        self.state = bytes(MOVERS[CHECK(action)](self.state))
        self.moves += 1
        solved = self.state == SOLVED
        return Step(self._view(), self._score(), solved, not solved and self.moves >= self.limit)

    def _score(self) -> float:
        if self.state != SOLVED:
            return 0.0
        return min(1.0, self.depth / self.moves) if self.moves else 1.0

    def _metrics(self) -> dict[str, float]:
        return {
            "score": self._score(),
            "solved": 1.0 if self.state == SOLVED else 0.0,
            "moves": float(self.moves),
        }
