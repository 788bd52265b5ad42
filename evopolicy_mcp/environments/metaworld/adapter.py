"""The ``metaworld`` adapter: Meta-World's 50 tasks, one family, on the kit.

The observation and action layout is the same for every task (Yu et al., "Meta-World:
A Benchmark and Evaluation for Multi-Task and Meta Reinforcement Learning", CoRL
2019, arXiv:1910.10897, and Meta-World 3.1's ``SawyerXYZEnv``); the success metric is
Meta-World's: the task counts as solved if its success condition held at any step.
Building a task's environment takes about a second (MuJoCo compiles the scene), far
more than an episode, so finished environments are reused: the seed hook re-draws
everything a reset depends on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evopolicy_mcp.adapters.gym import GymAdapter, Tally, Texts

__all__ = ["TASKS", "make_adapter"]

# metaworld.ALL_V3_ENVIRONMENTS, listed so the adapter knows its ids without importing
# Meta-World (a test checks the two agree).
TASKS = [
    "assembly-v3",
    "basketball-v3",
    "bin-picking-v3",
    "box-close-v3",
    "button-press-topdown-v3",
    "button-press-topdown-wall-v3",
    "button-press-v3",
    "button-press-wall-v3",
    "coffee-button-v3",
    "coffee-pull-v3",
    "coffee-push-v3",
    "dial-turn-v3",
    "disassemble-v3",
    "door-close-v3",
    "door-lock-v3",
    "door-open-v3",
    "door-unlock-v3",
    "drawer-close-v3",
    "drawer-open-v3",
    "faucet-close-v3",
    "faucet-open-v3",
    "hammer-v3",
    "hand-insert-v3",
    "handle-press-side-v3",
    "handle-press-v3",
    "handle-pull-side-v3",
    "handle-pull-v3",
    "lever-pull-v3",
    "peg-insert-side-v3",
    "peg-unplug-side-v3",
    "pick-out-of-hole-v3",
    "pick-place-v3",
    "pick-place-wall-v3",
    "plate-slide-back-side-v3",
    "plate-slide-back-v3",
    "plate-slide-side-v3",
    "plate-slide-v3",
    "push-back-v3",
    "push-v3",
    "push-wall-v3",
    "reach-v3",
    "reach-wall-v3",
    "shelf-place-v3",
    "soccer-v3",
    "stick-pull-v3",
    "stick-push-v3",
    "sweep-into-v3",
    "sweep-v3",
    "window-close-v3",
    "window-open-v3",
]

_FRAME = [
    ("hand_x", "end effector x (metres)"),
    ("hand_y", "end effector y (metres)"),
    ("hand_z", "end effector z (metres)"),
    ("gripper_open", "distance between the fingers, 0 closed .. 1 fully open (0.1 m)"),
    *((f"obj1_{c}", f"first object's position {c} (metres)") for c in "xyz"),
    *((f"obj1_q{c}", f"first object's orientation quaternion {c}") for c in "wxyz"),
    *(
        (f"obj2_{c}", f"second object's position {c} (metres; 0 if the task has none)")
        for c in "xyz"
    ),
    *((f"obj2_q{c}", f"second object's orientation quaternion {c} (0 if none)") for c in "wxyz"),
]


def _observation(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    names = [n for n, _ in _FRAME] + [f"prev_{n}" for n, _ in _FRAME]
    texts = [t for _, t in _FRAME] + [f"{t}, one step earlier" for _, t in _FRAME]
    names += ["goal_x", "goal_y", "goal_z"]
    texts += [
        f"goal position {c} (metres): where the task wants the object (or hand)" for c in "xyz"
    ]
    return {
        "description": "39 float64: the current frame (hand, gripper, up to two objects), "
        "the previous frame, and the goal position. Values are clipped to the bounds.",
        "names": names,
        "descriptions": texts,
    }


def _action(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    cm = round(100 * float(env.action_scale), 3)
    return {
        "description": "Move the end effector's target and set the gripper.",
        "names": ["dx", "dy", "dz", "grab"],
        "descriptions": [
            *(f"move the hand's target along {c} by up to {cm:g} cm per step" for c in "xyz"),
            "gripper effort: 1 closes the fingers with full force, -1 opens them",
        ],
    }


def _outcome(t: Tally) -> dict[str, float]:
    return {
        "success": float(t.counts.get("success", 0) > 0),
        "success_final": float(bool(t.info.get("success", 0.0))),
        "success_steps": float(t.counts.get("success", 0)),
        "grasped": float(t.counts.get("grasped", 0) > 0),
    }


def _seed(env: Any, seed: int) -> None:
    env.seed(seed)  # positions are drawn from env.np_random at the reset


METAWORLD = Texts(
    observation=_observation,
    action=_action,
    reward="Meta-World's shaped reward for the task (v2 reward functions), 0 to 10 per step",
    termination="never early: every episode runs 500 steps (truncated there)",
    metrics={
        "success": "1.0 if the task's success condition held at any step (Meta-World's "
        "success metric), else 0.0",
        "success_final": "1.0 if it held at the last step",
        "success_steps": "the number of steps at which it held",
        "grasped": "1.0 if the object was grasped at some step (info grasp_success)",
    },
    counters={
        "success": lambda obs, reward, info: bool(info.get("success", 0.0)),
        "grasped": lambda obs, reward, info: bool(info.get("grasp_success", False)),
    },
    outcome=_outcome,
    seed=_seed,
    reuse=True,
    replay_frames=60,  # software GL draws a few dozen frames a second
)


def make_adapter() -> GymAdapter:
    return GymAdapter(
        "metaworld",
        {f"metaworld/{name}": METAWORLD for name in TASKS},
        default=None,
        package="evopolicy_mcp.environments.metaworld.env",
        extra="metaworld",
        example_parameters={"env_id": "metaworld/reach-v3"},
    )
