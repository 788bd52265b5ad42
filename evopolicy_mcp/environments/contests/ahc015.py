"""AHC015 A "Halloween Candy" (AtCoder Heuristic Contest 015), one tilt per step.

https://atcoder.jp/contests/ahc015/tasks/ahc015_a. A 10 x 10 box fills with 100
candies of three flavours (all flavours known in advance). Candy t drops into the
p_t-th empty cell in row-major order (p_t uniform, revealed only then); then the box
is tilted front, back, left or right and every candy slides that way. Score
round(1e6 * sum of squared same-flavour component sizes / sum of squared flavour
counts).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, Step
from evopolicy_mcp.environments.contests.ahc058 import round_half_up
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec

SIDE, CANDIES = 10, 100
PARAMETERS: dict[str, Param] = {}
TILTS = "FBLR"

ACTIONS = spaces.discrete(
    4,
    [
        "0 F: tilt to the front, candies slide toward row 0",
        "1 B: tilt to the back, toward row 9",
        "2 L: tilt left, toward column 0",
        "3 R: tilt right, toward column 9",
    ],
)
CHECK = spaces.action_validator(ACTIONS)
OBSERVATION = spaces.dict_of(
    {
        "t": spaces.discrete(CANDIES, start=1, description="candies in the box, 1..99"),
        "grid": spaces.box(
            0, 3, (SIDE, SIDE), "uint8", description="[row][col], 0 empty, 1..3 flavour"
        ),
        "placed": spaces.multi_discrete([SIDE, SIDE], description="[row, col] of candy t"),
        "p": spaces.discrete(
            CANDIES,
            start=1,
            description="p_t: candy t went into the p_t-th empty cell in row-major order",
        ),
    },
    description="the box after candy t dropped in, before your tilt; the first observation "
    "also holds flavors (100 ints 1..3, candy t has flavors[t - 1])",
)
METRICS = {
    "score": "official absolute score round(1e6 * sum n_i^2 / sum d_f^2) of the full box "
    "(n_i component sizes, d_f flavour counts); 0 unless the episode finished",
    "components": "number of same-flavour 4-connected components in the final box",
}


def generate(seed: int) -> tuple[list[int], list[int]]:
    """Flavours f_t in 1..3 and drop positions p_t in 1..101 - t, t = 1..100."""
    rng = np.random.default_rng(seed)
    flavors = rng.integers(1, 3, size=CANDIES, endpoint=True).tolist()
    drops = [int(rng.integers(1, CANDIES + 1 - t, endpoint=True)) for t in range(1, CANDIES + 1)]
    return flavors, drops


def tilt(grid: bytearray, direction: int) -> None:
    """Slide every candy of the row-major ``grid`` toward side ``direction`` (0..3 = F B L R)."""
    if direction < 2:
        for c in range(SIDE):
            column = grid[c::SIDE].replace(b"\0", b"")
            pad = bytes(SIDE - len(column))
            grid[c::SIDE] = column + pad if direction == 0 else pad + column
    else:
        for r in range(0, SIDE * SIDE, SIDE):
            row = grid[r : r + SIDE].replace(b"\0", b"")
            pad = bytes(SIDE - len(row))
            grid[r : r + SIDE] = row + pad if direction == 2 else pad + row


def component_sizes(grid: bytes | bytearray) -> list[int]:
    """Sizes of the 4-connected same-flavour components of the non-empty cells."""
    seen = bytearray(SIDE * SIDE)
    sizes = []
    for start in range(SIDE * SIDE):
        if seen[start] or not grid[start]:
            continue
        flavour, stack, size = grid[start], [start], 0
        seen[start] = 1
        while stack:
            k = stack.pop()
            size += 1
            r, c = divmod(k, SIDE)
            for n, ok in (
                (k - SIDE, r > 0),
                (k + SIDE, r < SIDE - 1),
                (k - 1, c > 0),
                (k + 1, c < SIDE - 1),
            ):
                if ok and not seen[n] and grid[n] == flavour:
                    seen[n] = 1
                    stack.append(n)
        sizes.append(size)
    return sizes


def score(grid: bytes | bytearray) -> int:
    counts = [grid.count(f) for f in (1, 2, 3)]
    return round_half_up(
        1e6 * sum(n * n for n in component_sizes(grid)) / sum(d * d for d in counts)
    )


def spec(options: Options) -> EnvSpec:
    meta = {"side": SIDE, "candies": CANDIES, "tilts": TILTS, "contest": "AHC015"}
    return game_spec(OBSERVATION, ACTIONS, meta, METRICS, CANDIES - 1)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        self.flavors, self.drops = generate(seed)
        self.grid = bytearray(SIDE * SIDE)
        self.t = 0  # candies in the box
        self.placed = 0

    def _drop(self) -> dict[str, Any]:
        grid, p = self.grid, self.drops[self.t]
        k = -1
        for _ in range(p):
            k = grid.find(0, k + 1)
        grid[k] = self.flavors[self.t]
        self.t += 1
        return {
            "t": self.t,
            "grid": np.frombuffer(bytes(grid), dtype=np.uint8).reshape(SIDE, SIDE),
            "placed": list(divmod(k, SIDE)),
            "p": p,
        }

    def _begin(self) -> dict[str, Any]:
        obs = self._drop()
        obs["flavors"] = list(self.flavors)
        return obs

    def _play(self, action: Any) -> Step:
        tilt(self.grid, CHECK(action))
        obs = self._drop()
        if self.t < CANDIES:
            return Step(obs, 0.0, False, False)
        return Step(obs, float(score(self.grid)), True, False)

    def _metrics(self) -> dict[str, float]:
        finished = self.t == CANDIES and self._phase == "over"
        return {
            "score": float(score(self.grid)) if finished else 0.0,
            "components": float(len(component_sizes(self.grid))),
        }
