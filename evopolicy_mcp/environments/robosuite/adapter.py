"""The ``robosuite`` adapter: the single-arm tasks of robosuite 1.5 on the kit.

Observation entries are named by robosuite after what they measure; the texts
explain each name (the robot's own entries one by one, the objects' by their
suffix: ``_pos``, ``_quat``, ``gripper_to_...``, ``..._to_robot0_eef_pos``), following
robosuite's documentation (Zhu et al., "robosuite: A Modular Simulation Framework and
Benchmark for Robot Learning", 2020, arXiv:2009.12293). Building a robosuite
environment takes 3-6 s and a seeded reset restores it in milliseconds, so finished
environments are reused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evopolicy_mcp.adapters.gym import GymAdapter, Tally, Texts

__all__ = ["TASKS", "describe_key", "make_adapter"]

# robosuite's single-arm environments (env.SINGLE_ARM), listed here so that the adapter
# knows its ids without importing robosuite.
TASKS = (
    "Lift",
    "Stack",
    "NutAssembly",
    "NutAssemblySingle",
    "NutAssemblySquare",
    "NutAssemblyRound",
    "PickPlace",
    "PickPlaceSingle",
    "PickPlaceMilk",
    "PickPlaceBread",
    "PickPlaceCereal",
    "PickPlaceCan",
    "Door",
    "Wipe",
    "ToolHang",
)

ROBOT = {
    "robot0_joint_pos": "the arm's 7 joint angles (radians)",
    "robot0_joint_pos_cos": "cosines of the joint angles",
    "robot0_joint_pos_sin": "sines of the joint angles",
    "robot0_joint_vel": "joint velocities (rad/s)",
    "robot0_joint_acc": "joint accelerations (rad/s^2)",
    "robot0_eef_pos": "end effector (gripper) position x, y, z in the world frame (metres)",
    "robot0_eef_quat": "end effector orientation as a quaternion (x, y, z, w)",
    "robot0_eef_quat_site": "orientation of the end effector's site, quaternion (x, y, z, w)",
    "robot0_gripper_qpos": "positions of the two finger joints (metres)",
    "robot0_gripper_qvel": "velocities of the two finger joints (m/s)",
}
SPECIAL = {
    "hinge_qpos": "the door's hinge angle (radians; the door counts as open above 0.3)",
    "handle_qpos": "the door handle's angle (radians)",
    "proportion_wiped": "fraction of the markings wiped off so far (0..1)",
    "wipe_radius": "radius of the markings still to wipe around their centroid (metres)",
    "wipe_centroid": "centroid of the markings still to wipe (metres)",
    "frame_is_assembled": "1 if the frame is inserted into the base, else 0",
    "tool_on_frame": "1 if the tool hangs on the frame, else 0",
    "nut_id": "which nut this episode uses (0 square, 1 round)",
    "obj_id": "which object this episode uses (0 milk, 1 bread, 2 cereal, 3 can)",
}


def describe_key(key: str) -> str:
    """What an observation entry of a robosuite task measures."""
    if key in ROBOT:
        return ROBOT[key]
    if key in SPECIAL:
        return SPECIAL[key]
    if key.endswith("_to_robot0_eef_pos"):
        return (
            f"{key[: -len('_to_robot0_eef_pos')]}'s position in the end effector's frame (metres)"
        )
    if key.endswith("_to_robot0_eef_quat"):
        return f"{key[: -len('_to_robot0_eef_quat')]}'s orientation relative to the end effector (quaternion x, y, z, w)"
    if key.startswith("gripper_to_"):
        return f"vector from the gripper to {key[len('gripper_to_') :].removesuffix('_pos')} in the world frame (metres)"
    if "_to_" in key:
        a, b = key.split("_to_", 1)
        return f"vector from {a} to {b} (metres)"
    if key.endswith("_pos"):
        return f"position of {key[:-4]} in the world frame (metres)"
    if key.endswith("_quat"):
        return f"orientation of {key[:-5]}, quaternion (x, y, z, w)"
    return key.replace("_", " ")


def _observation(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "description": "robosuite's named state observations, each a float64 array "
        "(world frame: x towards the robot's front, z up; the table top is about z = 0.8 m).",
        "parts": {key: {"description": describe_key(key)} for key in env.observation_space.spaces},
    }


def _action(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    size = env.action_space.shape[0]
    names = ["dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper"][:size]
    texts = [
        *(f"move the end effector along {c} (1 = 5 cm in one control step)" for c in "xyz"),
        *(f"rotate the end effector about {c} (1 = 0.5 rad in one control step)" for c in "xyz"),
        "gripper: 1 closes, -1 opens",
    ][:size]
    return {
        "description": "Operational-space pose control (robosuite's OSC_POSE: changes of the "
        "end effector's pose, in the robot base's frame) at 20 Hz"
        + (", then the gripper command." if size == 7 else "; this task has no gripper."),
        "names": names,
        "descriptions": texts,
    }


def _outcome(t: Tally) -> dict[str, float]:
    steps = t.counts.get("success", 0)
    return {
        "success": float(steps > 0),
        "success_final": float(bool(t.info.get("success", False))),
        "success_steps": float(steps),
    }


ROBOSUITE = Texts(
    observation=_observation,
    action=_action,
    reward="robosuite's shaped reward for the task, scaled so one step gives at most 1",
    termination="never early: truncated at the horizon of 500 control steps (25 s)",
    metrics={
        "success": "1.0 if the task's success condition held at any step, else 0.0",
        "success_final": "1.0 if it held at the last step",
        "success_steps": "the number of steps at which it held",
    },
    counters={"success": lambda obs, reward, info: bool(info.get("success", False))},
    outcome=_outcome,
    horizon=lambda env: int(env.suite_env.horizon),
    reuse=True,
    replay_frames=60,  # software GL draws a dozen frames a second here
)


def make_adapter() -> GymAdapter:
    return GymAdapter(
        "robosuite",
        {f"robosuite/{task}-v0": ROBOSUITE for task in TASKS},
        default=None,
        package="evopolicy_mcp.environments.robosuite.env",
        extra="robosuite",
        example_parameters={"env_id": "robosuite/Lift-v0"},
    )
