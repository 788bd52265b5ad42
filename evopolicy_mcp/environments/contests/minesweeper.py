"""CodeChef MINESWPR "Minesweeper" (March 2013 Long Challenge), one operation per step.

https://www.codechef.com/problems/MINESWPR. An N x N field (30 <= N <= 50) holds M
mines, each cell a mine with probability P (0.1 <= P <= 0.3). With K >= M pieces of
dynamite neutralize every mine, using as few surveys as you can: a survey of a cell
answers "mine" or how many of its 8 neighbours hold live mines. At most N^2 surveys
and K neutralizations; Done with a live mine left is a wrong answer. Score
10 * (S + 1) / N^2 for S surveys, lower is better.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, InvalidAction, Step
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec, int_list

LOW, HIGH = 30, 50
MAX_STEPS = HIGH * HIGH + HIGH * HIGH // 2 + 1
PARAMETERS: dict[str, Param] = {}
SURVEY, NEUTRALIZE, DONE = 0, 1, 2
MINE = -1

ACTIONS = spaces.multi_discrete(
    [3, HIGH, HIGH],
    description="[op, x, y]: op 0 survey cell (x, y), 1 neutralize the mine in (x, y) if "
    "any (uses one dynamite either way), 2 Done (x, y ignored). 0 <= x, y < N of the "
    "episode; anything else, a survey beyond N^2, a neutralization beyond K, or Done while "
    "a mine is live is invalid_action",
)
CHECK = spaces.action_validator(ACTIONS)
OBSERVATION = spaces.dict_of(
    {
        "result": spaces.discrete(
            10,
            start=-1,
            description="answer to the survey just made: -1 the cell holds a live mine, "
            "0..8 live mines among its 8 neighbours; None after any other operation",
        ),
        "surveys_left": spaces.box(0, HIGH * HIGH, (), "int64"),
        "neutralizes_left": spaces.box(0, HIGH * HIGH // 2, (), "int64"),
    },
    description="the first observation also holds N, M (mines) and K (dynamite), with result None",
)
METRICS = {
    "score": "official score 10 * (S + 1) / N^2 (lower is better); 20 unless Done was accepted",
    "surveys": "surveys used, S",
    "neutralizations": "dynamite used",
    "mines_left": "live mines left",
}
UNFINISHED = 20.0


def generate(seed: int) -> tuple[np.ndarray, int]:
    """The mine field (bool [N][N], indexed [x][y]) and K, as the statement draws them."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(LOW, HIGH, endpoint=True))
    p = rng.uniform(0.1, 0.3)
    mines = rng.random((n, n)) < p
    m = int(mines.sum())
    k = m if rng.random() < 0.5 else int(rng.integers(m, n * n // 2, endpoint=True))
    return mines, k


def score(surveys: int, n: int) -> float:
    return 10 * (surveys + 1) / (n * n)


def spec(options: Options) -> EnvSpec:
    meta = {"N": f"{LOW}..{HIGH}, per episode", "contest": "CodeChef MARCH13", "code": "MINESWPR"}
    return game_spec(OBSERVATION, ACTIONS, meta, METRICS, MAX_STEPS)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        self.load(*generate(seed))

    def load(self, field: np.ndarray, k: int) -> None:
        """Play on ``field`` (bool [N][N], [x][y]) with ``k`` pieces of dynamite."""
        self.k = k
        self.n = n = len(field)
        self.mines = field.reshape(-1).astype(np.uint8).tolist()  # live mines, x * n + y
        self.m = self.live = sum(self.mines)
        padded = np.pad(field.astype(np.int64), 1)
        around = sum(
            padded[1 + dx : 1 + dx + n, 1 + dy : 1 + dy + n]
            for dx in (-1, 0, 1)
            for dy in (-1, 0, 1)
            if dx or dy
        )
        self.counts = np.asarray(around).reshape(-1).tolist()
        self.surveys = self.neutralized = 0

    def _observation(self, result: int | None) -> dict[str, Any]:
        return {
            "result": result,
            "surveys_left": self.n * self.n - self.surveys,
            "neutralizes_left": self.k - self.neutralized,
        }

    def _begin(self) -> dict[str, Any]:
        obs = self._observation(None)
        obs.update(N=self.n, M=self.m, K=self.k)
        return obs

    def _play(self, action: Any) -> Step:
        op, x, y = int_list(action, (3, HIGH, HIGH), CHECK)
        n = self.n
        if op == DONE:
            if self.live:
                raise InvalidAction(f"Done with {self.live} live mine(s) left (wrong answer)")
            return Step(self._observation(None), -score(self.surveys, n), True, False)
        if x >= n or y >= n:
            raise InvalidAction(f"cell ({x}, {y}) is outside the {n} x {n} field")
        k = x * n + y
        if op == SURVEY:
            if self.surveys == n * n:
                raise InvalidAction(f"a survey beyond the limit of N^2 = {n * n}")
            self.surveys += 1
            return Step(
                self._observation(MINE if self.mines[k] else self.counts[k]), 0.0, False, False
            )
        if self.neutralized == self.k:
            raise InvalidAction(f"a neutralization beyond the K = {self.k} pieces of dynamite")
        self.neutralized += 1
        if self.mines[k]:
            self.mines[k] = 0
            self.live -= 1
            counts = self.counts
            for nx in range(max(0, x - 1), min(n, x + 2)):
                for ny in range(max(0, y - 1), min(n, y + 2)):
                    counts[nx * n + ny] -= 1
            counts[k] += 1  # the cell itself is not its own neighbour
        return Step(self._observation(None), 0.0, False, False)

    def _metrics(self) -> dict[str, float]:
        done = self._phase == "over"
        return {
            "score": score(self.surveys, self.n) if done else UNFINISHED,
            "surveys": float(self.surveys),
            "neutralizations": float(self.neutralized),
            "mines_left": float(self.live),
        }
