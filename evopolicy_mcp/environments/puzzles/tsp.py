"""Travelling salesman, built one city at a time: a short closed tour through every city.

n cities uniform in the unit square (the random Euclidean instances of D. S. Johnson and
L. A. McGeoch's DIMACS TSP challenge, and of the learned-heuristic literature). The tour
starts at city 0; each step names the next unvisited city; after the last one the tour
returns to city 0. Score: the length of a reference tour (nearest neighbour from city 0,
then 2-opt until no exchange helps, computed at the end of the episode) over yours.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, InvalidAction, Step
from evopolicy_mcp.environments.puzzles.routing import distances, length, two_opt_tour
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec

PARAMETERS = {"cities": Param(50, 4, 1000, "cities")}
METRICS = {
    "score": "reference length (nearest neighbour + 2-opt) / your tour's length; above 1 "
    "beats the reference",
    "length": "your tour's length",
    "reference": "the reference tour's length",
}


def spec(options: Options) -> EnvSpec:
    n = options.cities
    actions = spaces.discrete(
        n, description="the next city; a visited one (or city 0) is invalid_action"
    )
    observation = spaces.dict_of(
        {
            "current": spaces.discrete(n, description="the city you are in"),
            "visited": spaces.box(0, 1, (n,), "uint8", description="1 for visited cities"),
        },
        description="the first observation also holds coords (float64 [n][2], in [0, 1])",
    )
    return game_spec(observation, actions, {"cities": n, "start": 0}, METRICS, n - 1)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        self.n = options.cities
        self.coords = np.random.default_rng(seed).random((self.n, 2))
        self.dist = distances(self.coords)
        self.tour = [0]
        self.seen = bytearray(self.n)
        self.seen[0] = 1
        self.travelled = 0.0
        self.reference = -1.0
        self.check = spaces.action_validator(spaces.discrete(self.n))

    def _observation(self) -> dict[str, Any]:
        return {"current": self.tour[-1], "visited": np.frombuffer(bytes(self.seen), np.uint8)}

    def _begin(self) -> dict[str, Any]:
        obs = self._observation()
        obs["coords"] = self.coords.copy()
        return obs

    def _play(self, action: Any) -> Step:
        city = self.check(action)
        if self.seen[city]:
            raise InvalidAction(f"city {city} was visited already")
        self.seen[city] = 1
        self.travelled += float(self.dist[self.tour[-1], city])
        self.tour.append(city)
        if len(self.tour) < self.n:
            return Step(self._observation(), 0.0, False, False)
        return Step(self._observation(), self._score(), True, False)

    def reference_length(self) -> float:
        if self.reference < 0:
            self.reference = length(self.dist, two_opt_tour(self.dist))
        return self.reference

    def _score(self) -> float:
        if len(self.tour) < self.n:
            return 0.0
        return self.reference_length() / length(self.dist, self.tour)

    def _metrics(self) -> dict[str, float]:
        done = len(self.tour) == self.n
        return {
            "score": self._score(),
            "length": length(self.dist, self.tour) if done else self.travelled,
            "reference": self.reference_length(),
        }
