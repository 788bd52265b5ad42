"""robosuite tasks as Gymnasium environments; importing this registers ``robosuite/<Task>-v0``.

The translation is thin:

- observation: robosuite's observation dict without its two concatenations
  (``robot0_proprio-state`` and ``object-state``, which repeat the other entries), one
  float64 Box per entry; where the task's object changes per episode, the entries of
  the objects not in play are zeros;
- action: robosuite's action spec (6 pose deltas for the default OSC_POSE controller
  and 1 gripper command, each in [-1, 1]; Wipe has no gripper);
- reward: robosuite's shaped reward, scaled to at most 1 per step (``reward_scale=1``);
- the episode is truncated at the horizon (500 control steps at 20 Hz); success
  (``_check_success``) does not end it and is reported in ``info["success"]``;
- ``reset(seed=)`` re-seeds the generator robosuite draws object placements and the
  robot's initial joint noise from; the model is built once (``hard_reset=False``), so
  a reset takes milliseconds instead of seconds;
- ``render()`` draws the ``agentview`` camera offscreen (``MUJOCO_GL=egl``).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import robosuite
from gymnasium import spaces

from evopolicy_mcp.environments.robosuite.adapter import TASKS

__all__ = ["CONCATENATIONS", "HORIZON", "RobosuiteEnv", "SINGLE_ARM"]

HORIZON = 500
CONCATENATIONS = ("robot0_proprio-state", "object-state")
SINGLE_ARM = TASKS  # the adapter lists them so that it need not import robosuite


class RobosuiteEnv(gymnasium.Env[dict[str, np.ndarray], np.ndarray]):
    """One robosuite task with the Panda arm and its default controller."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        task: str,
        robot: str = "Panda",
        render_mode: str | None = None,
        width: int = 160,
        height: int = 160,
        camera: str = "agentview",
    ) -> None:
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode
        self.task, self.robot = task, robot
        self._view = (camera, int(width), int(height))
        controller = robosuite.load_composite_controller_config(controller=None, robot=robot)
        self._env = robosuite.make(
            task,
            robots=robot,
            controller_configs=controller,
            has_renderer=False,
            has_offscreen_renderer=render_mode is not None,
            use_camera_obs=False,
            reward_shaping=True,
            reward_scale=1.0,
            control_freq=20,
            horizon=HORIZON,
            hard_reset=False,
            seed=0,
        )
        first = self._env.reset()
        # Every entry the task can show: in the single-object tasks (PickPlaceSingle,
        # NutAssemblySingle) the object changes per episode and robosuite shows only its
        # entries; the others' are kept here, as zeros, so the space stays the same.
        shown = {
            name: np.shape(first[name]) if name in first else tuple(ob._data_shape)
            for name, ob in self._env._observables.items()
            if (ob.is_active() or not ob.is_enabled()) and name not in CONCATENATIONS
        }
        self._zeros = {k: np.zeros(shape) for k, shape in shown.items()}
        self.observation_space = spaces.Dict(
            {k: spaces.Box(-np.inf, np.inf, shape, np.float64) for k, shape in shown.items()}
        )
        low, high = self._env.action_spec
        self.action_space = spaces.Box(
            np.asarray(low, np.float64), np.asarray(high, np.float64), dtype=np.float64
        )

    @property
    def suite_env(self) -> Any:
        """The robosuite environment (for texts: its robots and objects)."""
        return self._env

    def _observation(self, obs: dict[str, Any]) -> dict[str, np.ndarray]:
        return {
            k: np.asarray(obs[k], dtype=np.float64) if k in obs else zero
            for k, zero in self._zeros.items()
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            # Placement samplers and robots hold this very generator: set its state.
            state = np.random.default_rng(seed).bit_generator.state
            self._env.rng.bit_generator.state = state
        return self._observation(self._env.reset()), {"success": False}

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        obs, reward, done, _ = self._env.step(action)
        info = {"success": bool(self._env._check_success())}
        return self._observation(obs), float(reward), False, bool(done), info

    def render(self) -> np.ndarray | None:  # type: ignore[override]
        if self.render_mode != "rgb_array":
            return None
        camera, width, height = self._view
        frame: np.ndarray = self._env.sim.render(camera_name=camera, width=width, height=height)
        return np.ascontiguousarray(frame[::-1])  # MuJoCo's rows run bottom to top

    def close(self) -> None:
        self._env.close()


def _register() -> None:
    for task in SINGLE_ARM:
        name = f"robosuite/{task}-v0"
        if name not in gymnasium.registry:
            gymnasium.register(name, entry_point=f"{__name__}:RobosuiteEnv", kwargs={"task": task})


_register()
