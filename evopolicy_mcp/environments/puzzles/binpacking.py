"""Online bin packing: put each arriving item into a bin, using as few bins as you can.

Items arrive one at a time and must be packed at once, for good: into an open bin where it
fits, or into a new bin. Sizes are integers drawn uniformly from [low, high] (Falkenauer's
"uniform" class: bins of 150, items 20..100; E. Falkenauer, "A hybrid grouping genetic
algorithm for bin packing", Journal of Heuristics 2, 1996).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import AdapterError, EnvSpec, InvalidAction, Step
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec

PARAMETERS = {
    "items": Param(120, 2, 10_000, "items in an episode"),
    "capacity": Param(150, 2, 10_000, "capacity of a bin"),
    "low": Param(20, 1, 10_000, "smallest item size"),
    "high": Param(100, 1, 10_000, "largest item size, at most the capacity"),
}
METRICS = {
    "score": "ceil(total size / capacity) / bins used: the lower bound on bins over the bins "
    "you used (1 = no bin could be saved)",
    "bins": "bins used",
    "lower_bound": "ceil(total size / capacity)",
}


def generate(options: Options, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    sizes: list[int] = rng.integers(
        options.low, options.high, size=options.items, endpoint=True
    ).tolist()
    return sizes


def _check(options: Options) -> None:
    if not options.low <= options.high <= options.capacity:
        raise AdapterError("binpacking: need low <= high <= capacity")


def spec(options: Options) -> EnvSpec:
    _check(options)
    n = options.items
    actions = spaces.discrete(
        n,
        description="the bin for the item: 0 .. open bins - 1 an open bin (it must fit), "
        "open bins a new bin; anything higher, or a bin it does not fit, is invalid_action",
    )
    observation = spaces.dict_of(
        {
            "item": spaces.box(options.low, options.high, (), "int64", description="its size"),
            "loads": spaces.sequence_of(
                spaces.box(0, options.capacity, (), "int64"),
                "int64 array: load of each open bin, in the order opened",
            ),
            "items_left": spaces.box(
                0, n - 1, (), "int64", description="items still to come after this one"
            ),
        },
        description=f"the item to pack now; bins hold {options.capacity}",
    )
    meta = {"capacity": options.capacity, "items": n, "sizes": [options.low, options.high]}
    return game_spec(observation, actions, meta, METRICS, n)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        _check(options)
        self.capacity = options.capacity
        self.sizes = generate(options, seed)
        self.loads: list[int] = []
        self.i = 0
        self.check = spaces.action_validator(spaces.discrete(options.items))

    def _observation(self) -> dict[str, Any]:
        i = self.i
        return {
            "item": self.sizes[i] if i < len(self.sizes) else 0,
            "loads": np.array(self.loads, dtype=np.int64),
            "items_left": len(self.sizes) - i - 1,
        }

    def _begin(self) -> dict[str, Any]:
        return self._observation()

    def _play(self, action: Any) -> Step:
        b = self.check(action)
        loads, size = self.loads, self.sizes[self.i]
        if b == len(loads):
            loads.append(size)
            reward = -1.0
        elif b > len(loads):
            raise InvalidAction(
                f"bin {b} does not exist: {len(loads)} are open (bin {len(loads)} opens a new one)"
            )
        elif loads[b] + size > self.capacity:
            raise InvalidAction(
                f"item {self.i} of size {size} does not fit bin {b} "
                f"({loads[b]} of {self.capacity} used)"
            )
        else:
            loads[b] += size
            reward = 0.0
        self.i += 1
        return Step(self._observation(), reward, self.i == len(self.sizes), False)

    def bound(self) -> int:
        return -(-sum(self.sizes) // self.capacity)

    def _metrics(self) -> dict[str, float]:
        done = self.i == len(self.sizes)
        return {
            "score": self.bound() / len(self.loads) if done else 0.0,
            "bins": float(len(self.loads)),
            "lower_bound": float(self.bound()),
        }
