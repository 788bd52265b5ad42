"""AHC046 A "Skating with Blocks" (AtCoder Heuristic Contest 046), one action per step.

https://atcoder.jp/contests/ahc046/tasks/ahc046_a. A 20 x 20 rink, walled all round;
start at a random cell and visit 39 more random cells in order. Each turn: Move one
cell, Slide until the next cell is a block or the wall, or Alter (place or remove) a
block on the adjacent cell. A target counts when you stop on it while it is the next
one. At most 1600 actions; score m + 1 with m targets visited, or 1640 - T when all
are visited in T actions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, InvalidAction, Step
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec

N, M = 20, 40
LIMIT = 2 * N * M
PARAMETERS: dict[str, Param] = {}
KINDS = ("M", "S", "A")
DIRECTIONS = (("U", -1, 0), ("D", 1, 0), ("L", 0, -1), ("R", 0, 1))

ACTIONS = spaces.discrete(
    12,
    [
        f"{4 * k + d} {kind}{name}: "
        + {"M": "move one cell", "S": "slide", "A": "alter the block on the adjacent cell"}[kind]
        + f" {['up', 'down', 'left', 'right'][d]}"
        for k, kind in enumerate(KINDS)
        for d, (name, _, _) in enumerate(DIRECTIONS)
    ],
    description="4 * kind + direction: kind 0 Move, 1 Slide, 2 Alter; direction 0 U (row - 1), "
    "1 D (row + 1), 2 L (col - 1), 3 R (col + 1)",
)
CHECK = spaces.action_validator(ACTIONS)
OBSERVATION = spaces.dict_of(
    {
        "t": spaces.discrete(LIMIT, description="actions taken so far"),
        "position": spaces.multi_discrete([N, N], description="[row, col] of the skater"),
        "next": spaces.discrete(M, start=1, description="index k of the next target (1..39)"),
        "blocks": spaces.box(0, 1, (N, N), "uint8", description="[row][col], 1 = block"),
    },
    description="the state before this action; the first observation also holds targets "
    "(int64 [40][2]: targets[0] is the start, then the 39 targets in order)",
)
METRICS = {
    "score": "official absolute score: m + 1 with m < 39 targets visited, else 1640 - T",
    "visited": "targets visited, m (0..39)",
    "actions": "actions taken, T",
}


def generate(seed: int) -> np.ndarray:
    """The start and the 39 targets: the first 40 cells of a uniform shuffle of all 400."""
    rng = np.random.default_rng(seed)
    cells = rng.permutation(N * N)[:M]
    return np.stack([cells // N, cells % N], axis=1).astype(np.int64)


def score(visited: int, actions: int) -> int:
    return M + LIMIT - actions if visited == M - 1 else visited + 1


def spec(options: Options) -> EnvSpec:
    meta = {"N": N, "M": M, "max_actions": LIMIT, "contest": "AHC046"}
    return game_spec(OBSERVATION, ACTIONS, meta, METRICS, LIMIT)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        self.targets = generate(seed)
        self.points = [tuple(p) for p in self.targets.tolist()]
        self.blocks = bytearray(N * N)
        self.blocks_view = self._view()
        self.r, self.c = self.points[0]
        self.next = 1
        self.t = 0

    def _view(self) -> np.ndarray:
        return np.frombuffer(bytes(self.blocks), dtype=np.uint8).reshape(N, N)

    def _observation(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "position": [self.r, self.c],
            "next": self.next,
            "blocks": self.blocks_view,
        }

    def _begin(self) -> dict[str, Any]:
        obs = self._observation()
        obs["targets"] = self.targets.copy()
        return obs

    def _play(self, action: Any) -> Step:
        kind, d = divmod(CHECK(action), 4)
        name, dr, dc = DIRECTIONS[d]
        r, c, blocks = self.r, self.c, self.blocks
        nr, nc = r + dr, c + dc
        inside = 0 <= nr < N and 0 <= nc < N
        if kind == 0:
            if not inside or blocks[nr * N + nc]:
                what = "the wall" if not inside else "a block"
                raise InvalidAction(f"action {self.t}: M{name} from ({r}, {c}) runs into {what}")
            self.r, self.c = nr, nc
        elif kind == 1:
            while 0 <= nr < N and 0 <= nc < N and not blocks[nr * N + nc]:
                r, c, nr, nc = nr, nc, nr + dr, nc + dc
            self.r, self.c = r, c
        else:
            if not inside:
                raise InvalidAction(f"action {self.t}: A{name} from ({r}, {c}) is off the rink")
            blocks[nr * N + nc] ^= 1
            self.blocks_view = self._view()
        self.t += 1
        if kind != 2 and (self.r, self.c) == self.points[self.next]:
            self.next += 1
            if self.next == M:
                return Step(self._observation(), float(score(M - 1, self.t)), True, False)
        if self.t < LIMIT:
            return Step(self._observation(), 0.0, False, False)
        return Step(self._observation(), float(score(self.next - 1, self.t)), False, True)

    def _metrics(self) -> dict[str, float]:
        visited = self.next - 1
        return {
            "score": float(score(visited, self.t)),
            "visited": float(visited),
            "actions": float(self.t),
        }
