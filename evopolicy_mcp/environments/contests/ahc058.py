"""AHC058 A "Apple Incremental Game" (AtCoder Heuristic Contest 058), one turn per step.

https://atcoder.jp/contests/ahc058/tasks/ahc058_a. Ten machine IDs on four levels;
each turn strengthen one machine (paying C[i][j] * (P[i][j] + 1) apples) or do
nothing, then every machine produces in level order: level 0 makes apples
(A[j] * B[0][j] * P[0][j]), level i >= 1 adds B[i][j] * P[i][j] machines to
level i - 1. 500 turns; score round(1e5 * log2(apples)). Apples and machine
counts are exact Python integers: good play passes 2**63.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, InvalidAction, Step
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec

N, L, T, K = 10, 4, 500, 1
PARAMETERS: dict[str, Param] = {}

ACTIONS = spaces.discrete(
    N * L + 1,
    ["-1: do nothing"]
    + [f"{i * N + j}: strengthen machine ID {j} of level {i}" for i in range(L) for j in range(N)],
    start=-1,
    description="-1 does nothing; a = 10 * i + j strengthens machine j^i (level i = a // 10, "
    "ID j = a % 10) for C[i][j] * (P[i][j] + 1) apples; more than you have is invalid_action",
)
CHECK = spaces.action_validator(ACTIONS)
OBSERVATION = spaces.dict_of(
    {
        "turn": spaces.discrete(T, description="turns played so far, 0..499"),
        "apples": spaces.box(0, np.inf, (), "int64", description="apples now (a Python int)"),
        "B": spaces.box(1, np.inf, (L, N), "int64", description="B[i][j]: machines j^i (ints)"),
        "P": spaces.box(0, T, (L, N), "int64", description="P[i][j]: power of machine j^i"),
    },
    description="the state before this turn's action; the first observation also holds "
    "N, L, T, K, A (10 ints) and C (4 x 10 ints), constant for the episode. Lists of Python "
    "ints: apples and B grow past 2**63",
)
METRICS = {
    "score": "official absolute score round(1e5 * log2(apples after 500 turns)), 0 if apples is 0",
    "log2_apples": "log2 of the apples held at the end of the episode (so far)",
    "strengthened": "number of strengthen actions",
}


def round_half_up(x: float) -> int:
    """Rust's ``f64::round`` for the non-negative values scores take (Python rounds half to even)."""
    return math.floor(x + 0.5)


def generate(seed: int) -> tuple[list[int], list[list[int]]]:
    """A (sorted ascending, A[0] = 1) and C as the statement's generator draws them."""
    rng = np.random.default_rng(seed)
    a = [1] + [round_half_up(10 ** rng.uniform(0.0, 2.0)) for _ in range(N - 1)]
    a.sort()
    c = [
        [
            1 if i == 0 and j == 0 else round_half_up(a[j] * 500**i * 10 ** rng.uniform(0.0, 2.0))
            for j in range(N)
        ]
        for i in range(L)
    ]
    return a, c


def score(apples: int) -> int:
    return round_half_up(1e5 * math.log2(apples)) if apples > 0 else 0


def spec(options: Options) -> EnvSpec:
    return game_spec(
        OBSERVATION,
        ACTIONS,
        {"N": N, "L": L, "T": T, "K": K, "contest": "AHC058", "problem": "ahc058_a"},
        METRICS,
        T,
    )


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        self.A, self.C = generate(seed)
        self.B = [[1] * N for _ in range(L)]
        self.P = [[0] * N for _ in range(L)]
        self.apples = K
        self.turn = 0
        self.strengthened = 0

    def _observation(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "apples": self.apples,
            "B": [row[:] for row in self.B],
            "P": [row[:] for row in self.P],
        }

    def _begin(self) -> dict[str, Any]:
        obs = self._observation()
        obs.update(N=N, L=L, T=T, K=K, A=list(self.A), C=[row[:] for row in self.C])
        return obs

    def _play(self, action: Any) -> Step:
        action = CHECK(action)
        B, P = self.B, self.P
        if action >= 0:
            i, j = divmod(action, N)
            cost = self.C[i][j] * (P[i][j] + 1)
            if cost > self.apples:
                raise InvalidAction(
                    f"turn {self.turn}: strengthening machine {j}^{i} costs {cost} apples, "
                    f"you have {self.apples}"
                )
            self.apples -= cost
            P[i][j] += 1
            self.strengthened += 1
        A, b0, p0 = self.A, B[0], P[0]
        self.apples += sum(A[j] * b0[j] * p0[j] for j in range(N))
        for i in range(1, L):
            lower, b, p = B[i - 1], B[i], P[i]
            for j in range(N):
                if p[j]:
                    lower[j] += b[j] * p[j]
        self.turn += 1
        done = self.turn >= T
        return Step(self._observation(), float(score(self.apples)) if done else 0.0, done, False)

    def _metrics(self) -> dict[str, float]:
        return {
            "score": float(score(self.apples)) if self.turn >= T else 0.0,
            "log2_apples": math.log2(self.apples) if self.apples > 0 else 0.0,
            "strengthened": float(self.strengthened),
        }

    def _report(self) -> dict[str, Any]:
        return {"turn": self.turn, "apples_digits": len(str(self.apples)), "P": self.P}
