"""Capacitated vehicle routing, built one stop at a time: serve every customer from the depot.

A depot and n customers uniform in the unit square, demands uniform in 1..9, one vehicle
of capacity 30 (n <= 20), 40 (n <= 50) or 50 (larger) that may return to the depot to
reload as often as it likes (the instances of M. Nazari et al., "Reinforcement learning for
solving the vehicle routing problem", NeurIPS 2018, and W. Kool et al., "Attention, learn
to solve routing problems!", ICLR 2019). Each step names the next stop: an unserved
customer whose demand fits the load left, or the depot. After the last customer the
vehicle returns to the depot. Score: the length of Clarke and Wright's savings routes
(computed at the end of the episode) over yours.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, InvalidAction, Step
from evopolicy_mcp.environments.puzzles.routing import distances, length, savings_routes
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec

PARAMETERS = {"customers": Param(20, 2, 500, "customers")}
METRICS = {
    "score": "reference length (Clarke-Wright savings) / your length; above 1 beats it",
    "length": "total distance driven",
    "reference": "the savings routes' length",
    "trips": "returns to the depot (the final one included)",
}


def capacity(customers: int) -> int:
    return 30 if customers <= 20 else 40 if customers <= 50 else 50


def spec(options: Options) -> EnvSpec:
    n = options.customers
    actions = spaces.discrete(
        n + 1,
        description="0 the depot (reload), 1..n a customer; a served customer, one whose "
        "demand exceeds the load left, or the depot while at the depot is invalid_action",
    )
    observation = spaces.dict_of(
        {
            "current": spaces.discrete(n + 1, description="where the vehicle is (0 depot)"),
            "load": spaces.box(0, capacity(n), (), "int64", description="load left"),
            "served": spaces.box(
                0,
                1,
                (n + 1,),
                "uint8",
                description="1 for served customers (index 0, the depot: 0)",
            ),
        },
        description="the first observation also holds coords (float64 [n + 1][2], index 0 the "
        "depot), demand (int64 [n + 1], 0 for the depot) and capacity",
    )
    meta = {"customers": n, "capacity": capacity(n), "demand": [1, 9]}
    return game_spec(observation, actions, meta, METRICS, 2 * n)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        n = self.n = options.customers
        rng = np.random.default_rng(seed)
        self.coords = rng.random((n + 1, 2))
        self.demand = [0] + rng.integers(1, 9, size=n, endpoint=True).tolist()
        self.capacity = self.load = capacity(n)
        self.dist = distances(self.coords)
        self.served = bytearray(n + 1)
        self.left = n
        self.here = 0
        self.driven = 0.0
        self.trips = 0
        self.reference = -1.0
        self.check = spaces.action_validator(spaces.discrete(n + 1))

    def _observation(self) -> dict[str, Any]:
        return {
            "current": self.here,
            "load": self.load,
            "served": np.frombuffer(bytes(self.served), np.uint8),
        }

    def _begin(self) -> dict[str, Any]:
        obs = self._observation()
        obs.update(
            coords=self.coords.copy(),
            demand=np.array(self.demand, dtype=np.int64),
            capacity=self.capacity,
        )
        return obs

    def _play(self, action: Any) -> Step:
        stop = self.check(action)
        if stop == 0:
            if self.here == 0:
                raise InvalidAction("the vehicle is at the depot already")
            self.load = self.capacity
            self.trips += 1
        elif self.served[stop]:
            raise InvalidAction(f"customer {stop} was served already")
        elif self.demand[stop] > self.load:
            raise InvalidAction(
                f"customer {stop} needs {self.demand[stop]}; the vehicle has {self.load} left"
            )
        else:
            self.served[stop] = 1
            self.load -= self.demand[stop]
            self.left -= 1
        self.driven += float(self.dist[self.here, stop])
        self.here = stop
        if self.left:
            return Step(self._observation(), 0.0, False, False)
        self.driven += float(self.dist[stop, 0])
        self.here = 0
        self.trips += 1
        return Step(self._observation(), self._score(), True, False)

    def reference_length(self) -> float:
        if self.reference < 0:
            routes = savings_routes(self.dist, self.demand, self.capacity)
            self.reference = sum(length(self.dist, [0, *route]) for route in routes)
        return self.reference

    def _score(self) -> float:
        return self.reference_length() / self.driven if not self.left else 0.0

    def _metrics(self) -> dict[str, float]:
        return {
            "score": self._score(),
            "length": self.driven,
            "reference": self.reference_length(),
            "trips": float(self.trips),
        }
