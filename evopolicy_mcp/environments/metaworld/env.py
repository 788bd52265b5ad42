"""Meta-World tasks as Gymnasium ids; importing this registers ``metaworld/<task>-v3``.

Each id makes the task's Sawyer environment as Meta-World's MT1 benchmark poses it:
the goal position is part of the observation, and the object and goal positions are
drawn afresh at every reset from the environment's own generator, which
``env.seed(n)`` sets (Meta-World's ``reset(seed=)`` ignores its seed; the family's seed
hook calls ``seed`` before each reset). Episodes are cut at the benchmark's 500 steps.
Rendering takes ``width`` and ``height`` here, which Meta-World's registered ids do
not pass on.
"""

from __future__ import annotations

from typing import Any

import gymnasium
from metaworld.env_dict import ALL_V3_ENVIRONMENTS

__all__ = ["STEPS", "make_task"]

STEPS = 500  # Meta-World's max_path_length


def make_task(env_name: str, render_mode: Any = None, width: int = 160, height: int = 160) -> Any:
    env = ALL_V3_ENVIRONMENTS[env_name](render_mode=render_mode, width=width, height=height)
    env._partially_observable = False  # MT1: the goal is observed
    del env.sawyer_observation_space  # a cached property of the observability
    env._set_task_called = True
    env._freeze_rand_vec = False  # draw positions at each reset ...
    env.seeded_rand_vec = True  # ... from env.np_random, which env.seed() sets
    env.seed(0)
    return env


def _register() -> None:
    for name in ALL_V3_ENVIRONMENTS:
        if f"metaworld/{name}" not in gymnasium.registry:
            gymnasium.register(
                f"metaworld/{name}",
                entry_point=f"{__name__}:make_task",
                kwargs={"env_name": name},
                max_episode_steps=STEPS,
            )


_register()
