"""A Gymnasium environment registered on import, for the kit's tests: every space type.

``import tests.support.toy_env`` registers ``Toy/Spaces-v0`` (every observation and
action space type, renders frames) and ``Toy/NoRender-v0`` (its render() fails the
way a machine without a display does).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

__all__ = ["SpacesEnv"]


class SpacesEnv(gymnasium.Env[dict[str, Any], dict[str, Any]]):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode: str | None = None, length: int = 12, draws: bool = True):
        self.render_mode = render_mode
        self.length = length
        self.draws = draws
        self.observation_space = spaces.Dict(
            {
                "grid": spaces.Box(0, 255, (5, 5, 3), np.uint8),
                "mission": spaces.Text(40, charset="abcdefghijklmnopqrstuvwxyz "),
                "counts": spaces.MultiDiscrete([3, 4]),
                "flags": spaces.MultiBinary(3),
                "pair": spaces.Tuple((spaces.Discrete(5), spaces.Box(-1.0, 1.0, (2,)))),
                "trail": spaces.Sequence(spaces.Discrete(4)),
            }
        )
        self.action_space = spaces.Dict(
            {
                "move": spaces.MultiDiscrete([3, 3]),
                "switches": spaces.MultiBinary(2),
                "say": spaces.Text(6, min_length=1, charset="abc"),
            }
        )
        self.t = 0
        self.trail: list[int] = []

    def _obs(self) -> dict[str, Any]:
        rng = self.np_random
        return {
            "grid": rng.integers(0, 256, (5, 5, 3), dtype=np.uint8),
            "mission": "go to the " + ["red", "blue"][int(rng.integers(2))] + " box",
            "counts": rng.integers(0, [3, 4]),
            "flags": rng.integers(0, 2, 3).astype(np.int8),
            "pair": (int(rng.integers(5)), rng.uniform(-1, 1, 2).astype(np.float32)),
            "trail": tuple(self.trail),
        }

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.t, self.trail = 0, []
        return self._obs(), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        self.trail.append(int(action["move"][0]))
        reward = float(len(action["say"])) - float(np.sum(action["switches"]))
        return self._obs(), reward, False, self.t >= self.length, {}

    def render(self) -> Any:
        if not self.draws:
            raise RuntimeError("X11: The DISPLAY environment variable is missing")
        frame = np.zeros((40, 60, 3), dtype=np.uint8)
        frame[:, : 5 * self.t % 60] = 200
        return frame


gymnasium.register("Toy/Spaces-v0", entry_point=SpacesEnv)
gymnasium.register("Toy/NoRender-v0", entry_point=SpacesEnv, kwargs={"draws": False})
