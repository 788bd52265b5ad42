"""A Gymnasium environment whose ``reset(seed=)`` does not seed it, for the kit's hooks.

``import tests.support.seeded_env`` registers ``Toy/OwnSeed-v0``: like NetHack or
Meta-World, it draws its episodes from a generator only ``reseed(n)`` sets. It counts
the instances made and closed (``SeededEnv.made``, ``SeededEnv.closed``), so tests can
see environments being reused.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

__all__ = ["SeededEnv"]


class SeededEnv(gymnasium.Env[np.ndarray, int]):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}
    made = 0
    closed = 0

    def __init__(
        self, render_mode: str | None = None, length: int = 10, fail_on: int | None = None
    ) -> None:
        type(self).made += 1
        self.render_mode = render_mode
        self.length = length
        self.fail_on = fail_on  # an action that makes step() raise, as a broken simulator
        self.observation_space = spaces.Box(0.0, 1.0, (3,), np.float64)
        self.action_space = spaces.Discrete(3)
        self._rng = np.random.default_rng()  # unseeded until reseed()
        self.t = 0

    def reseed(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)  # seeds np_random, which this environment never uses
        self.t = 0
        return self._rng.random(3), {}

    def step(self, action: int) -> Any:
        if action == self.fail_on:
            raise RuntimeError("the simulator broke")
        self.t += 1
        obs = self._rng.random(3)
        return obs, float(action) * float(obs[0]), bool(obs[1] > 0.97), self.t >= self.length, {}

    def render(self) -> Any:
        return np.full((8, 8, 3), 20 * self.t % 256, dtype=np.uint8)

    def close(self) -> None:
        type(self).closed += 1


gymnasium.register("Toy/OwnSeed-v0", entry_point=SeededEnv)
