"""A DeepMind Control Suite task as a Gymnasium environment; importing this registers them.

Importing the module registers ``dm_control/<domain>-<task>-v0`` for every task of
``dm_control.suite.ALL_TASKS`` (``dm_control/cheetah-run-v0``), so the kit's
Gymnasium adapter serves them like any other id. The translation is thin:

- observation: the time step's observation dict, one float64 Box per entry in the
  suite's order and shapes (a scalar stays a 0-d array);
- action: the suite's bounded action spec as a Box (all of the suite is ``[-1, 1]``);
- reward: the suite's reward (every benchmark task gives 0..1 per step);
- the episode ends where the suite's does: at its step limit (1000 control steps),
  reported as truncation, or at a terminal state (discount 0), as termination;
- ``reset(seed=)`` re-seeds the task's own random state, from which the suite draws
  every initial state, so the same seed gives the same episode in any process;
- ``render()`` draws camera 0 offscreen (``MUJOCO_GL=egl`` or ``osmesa``).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import gymnasium
import numpy as np
from dm_control import suite
from gymnasium import spaces

__all__ = ["DmcEnv", "NAMESPACE", "env_id"]

NAMESPACE = "dm_control"


def env_id(domain: str, task: str) -> str:
    return f"{NAMESPACE}/{domain}-{task}-v0"


def _box(shape: tuple[int, ...]) -> spaces.Box:
    return spaces.Box(-np.inf, np.inf, shape, np.float64)


class DmcEnv(gymnasium.Env[dict[str, np.ndarray], np.ndarray]):
    """One suite task; ``render_mode="rgb_array"`` draws ``width`` x ``height`` frames."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

    def __init__(
        self,
        domain: str,
        task: str,
        render_mode: str | None = None,
        width: int = 240,
        height: int = 240,
        camera_id: int = 0,
    ) -> None:
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode
        self.domain, self.task = domain, task
        self._size = (int(height), int(width))
        self._camera = int(camera_id)
        self._env = suite.load(domain, task, task_kwargs={"random": 0})
        self.observation_space = spaces.Dict(
            OrderedDict(
                (name, _box(tuple(spec.shape)))
                for name, spec in self._env.observation_spec().items()
            )
        )
        action = self._env.action_spec()
        self.action_space = spaces.Box(
            np.broadcast_to(action.minimum, action.shape).astype(np.float64),
            np.broadcast_to(action.maximum, action.shape).astype(np.float64),
            action.shape,
            np.float64,
        )
        self.metadata = {**self.metadata, "render_fps": round(1 / self._env.control_timestep())}

    @property
    def physics(self) -> Any:
        """The suite's physics (model names, positions), for texts and renders."""
        return self._env.physics

    @property
    def step_limit(self) -> int:
        return int(self._env._step_limit)

    @property
    def control_timestep(self) -> float:
        return float(self._env.control_timestep())

    def _observation(self, step: Any) -> dict[str, np.ndarray]:
        return {k: np.asarray(v, dtype=np.float64) for k, v in step.observation.items()}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            # The suite draws every initial state from the task's RandomState; it takes
            # 32-bit words, so a 64-bit seed goes in as two.
            self._env.task.random.seed([seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF])
        return self._observation(self._env.reset()), {}

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        step = self._env.step(action)
        ended = step.last()
        terminated = ended and step.discount == 0.0
        return self._observation(step), float(step.reward), terminated, ended and not terminated, {}

    def render(self) -> np.ndarray | None:  # type: ignore[override]
        if self.render_mode != "rgb_array":
            return None
        height, width = self._size
        frame: np.ndarray = self._env.physics.render(height, width, camera_id=self._camera)
        return frame

    def close(self) -> None:
        self._env.close()


def _register() -> None:
    for domain, task in suite.ALL_TASKS:
        name = env_id(domain, task)
        if name not in gymnasium.registry:
            gymnasium.register(
                name, entry_point=f"{__name__}:DmcEnv", kwargs={"domain": domain, "task": task}
            )


_register()
