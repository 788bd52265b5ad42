"""Online 0/1 knapsack: take or leave each arriving item, within the capacity.

Items arrive one at a time with an integer weight and value, each uniform in [1, 100]
and independent ("uncorrelated" instances, D. Pisinger, "Where are the hard knapsack
problems?", Computers & Operations Research 32, 2005). The capacity is 12.5 per item
(a quarter of the expected total weight). Decisions are final. The score compares your
total value with the best any choice of the same items could reach (dynamic programming
at the end of the episode).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, InvalidAction, Step
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec

PARAMETERS = {"items": Param(50, 2, 2000, "items in an episode")}
HIGH = 100
ACTIONS = spaces.discrete(
    2,
    ["0: leave the item", "1: take it"],
    description="taking an item heavier than the capacity left is invalid_action",
)
CHECK = spaces.action_validator(ACTIONS)
OBSERVATION = spaces.dict_of(
    {
        "weight": spaces.box(1, HIGH, (), "int64"),
        "value": spaces.box(1, HIGH, (), "int64"),
        "capacity_left": spaces.box(0, np.inf, (), "int64"),
        "items_left": spaces.box(
            0, np.inf, (), "int64", description="items still to come after this one"
        ),
    },
    description="the item to decide now; the first observation also holds capacity and items",
)
METRICS = {
    "score": "your total value / the best total value of any subset that fits (offline optimum)",
    "value": "total value taken",
    "optimum": "offline optimum",
}


def capacity(items: int) -> int:
    return 25 * items // 2


def generate(items: int, seed: int) -> tuple[list[int], list[int]]:
    rng = np.random.default_rng(seed)
    weights = rng.integers(1, HIGH, size=items, endpoint=True).tolist()
    values = rng.integers(1, HIGH, size=items, endpoint=True).tolist()
    return weights, values


def optimum(weights: list[int], values: list[int], room: int) -> int:
    best = np.zeros(room + 1, dtype=np.int64)
    for w, v in zip(weights, values, strict=True):
        if w <= room:
            np.maximum(best[w:], best[:-w] + v, out=best[w:])
    return int(best[-1])


def spec(options: Options) -> EnvSpec:
    n = options.items
    meta = {"items": n, "capacity": capacity(n), "weights": [1, HIGH], "values": [1, HIGH]}
    return game_spec(OBSERVATION, ACTIONS, meta, METRICS, n)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        self.n = options.items
        self.weights, self.values = generate(self.n, seed)
        self.capacity = self.room = capacity(self.n)
        self.i = self.value = 0
        self.best = -1

    def _observation(self) -> dict[str, Any]:
        i = min(self.i, self.n - 1)
        return {
            "weight": self.weights[i],
            "value": self.values[i],
            "capacity_left": self.room,
            "items_left": self.n - self.i - 1,
        }

    def _begin(self) -> dict[str, Any]:
        obs = self._observation()
        obs.update(capacity=self.capacity, items=self.n)
        return obs

    def _play(self, action: Any) -> Step:
        i = self.i
        reward = 0.0
        if CHECK(action):
            w = self.weights[i]
            if w > self.room:
                raise InvalidAction(f"item {i} weighs {w}; only {self.room} capacity is left")
            self.room -= w
            self.value += self.values[i]
            reward = float(self.values[i])
        self.i += 1
        return Step(self._observation(), reward, self.i == self.n, False)

    def optimum(self) -> int:
        if self.best < 0:
            self.best = optimum(self.weights, self.values, self.capacity)
        return self.best

    def _metrics(self) -> dict[str, float]:
        done = self.i == self.n
        return {
            "score": self.value / self.optimum() if done else 0.0,
            "value": float(self.value),
            "optimum": float(self.optimum()),
        }
