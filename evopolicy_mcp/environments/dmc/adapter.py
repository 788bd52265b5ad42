"""The ``dmc`` adapter: the DeepMind Control Suite on the kit's Gymnasium adapter.

:mod:`evopolicy_mcp.environments.dmc.env` registers every suite task as a Gymnasium
id; this module says what each domain's observation entries and actuators mean.
Component names come from the live MuJoCo model (joint and actuator names), so
they cannot drift from the suite; the meanings follow the suite's source and its
description in Tassa et al., "DeepMind Control Suite" (2018, arXiv:1801.00690).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evopolicy_mcp.adapters.gym import GymAdapter, Texts

__all__ = ["BENCHMARKING", "DOMAINS", "make_adapter"]

# dm_control.suite.BENCHMARKING (a test checks the two agree); listed here so that the
# adapter knows its ids without importing the suite.
BENCHMARKING = (
    *(("acrobot", t) for t in ("swingup", "swingup_sparse")),
    ("ball_in_cup", "catch"),
    *(("cartpole", t) for t in ("balance", "balance_sparse", "swingup", "swingup_sparse")),
    ("cheetah", "run"),
    *(("finger", t) for t in ("spin", "turn_easy", "turn_hard")),
    *(("fish", t) for t in ("upright", "swim")),
    *(("hopper", t) for t in ("stand", "hop")),
    *(("humanoid", t) for t in ("stand", "walk", "run")),
    ("manipulator", "bring_ball"),
    ("pendulum", "swingup"),
    ("point_mass", "easy"),
    *(("reacher", t) for t in ("easy", "hard")),
    *(("swimmer", t) for t in ("swimmer6", "swimmer15")),
    *(("walker", t) for t in ("stand", "walk", "run")),
)

_QPOS = "joint positions (qpos): metres for slide joints, radians for hinges"
_QVEL = "joint velocities (qvel): m/s for slide joints, rad/s for hinges"
_TOUCH = "log(1 + contact force in newtons) of each touch sensor"

# What each observation entry of a domain is, from the suite's get_observation.
DOMAINS: dict[str, dict[str, str]] = {
    "acrobot": {
        "orientations": "x then z components of the upper and lower links' axes "
        "[upper_x, lower_x, upper_z, lower_z]: sines and cosines of the absolute link "
        "angles, z = 1 pointing straight up",
        "velocity": "angular velocities of the shoulder and elbow hinges in rad/s",
    },
    "ball_in_cup": {
        "position": "cup x, cup z (metres), ball x, ball z relative to the cup's slides",
        "velocity": "the four velocities in m/s, same order",
    },
    "cartpole": {
        "position": "cart position (metres, 0 = centre), then for each pole the cosine and "
        "sine of its angle from vertical (cosine 1 = upright)",
        "velocity": "cart velocity (m/s), then each pole's angular velocity (rad/s)",
    },
    "cheetah": {
        "position": "root z (height, metres) and pitch (radians), then the six leg joint "
        "angles (radians); the horizontal position is left out",
        "velocity": "root x, z velocities (m/s), pitch rate and the six joint velocities "
        "(rad/s); root x velocity is the running speed",
    },
    "finger": {
        "position": "proximal and distal joint angles (radians), then the spinner tip's "
        "x, z relative to its hinge (metres)",
        "velocity": "proximal, distal and spinner hinge angular velocities (rad/s)",
        "touch": _TOUCH + " (top, bottom of the finger tip)",
        "target_position": "target x, z relative to the spinner's hinge (metres)",
        "dist_to_target": "signed distance from the tip to the target's surface "
        "(metres; negative = inside the target)",
    },
    "fish": {
        "joint_angles": "the seven fin and tail joint angles (radians)",
        "upright": "z component of the torso's z axis (1 = upright, -1 = upside down)",
        "target": "vector from the mouth to the target in the mouth's frame (metres)",
        "velocity": "torso linear and angular velocity and the joint velocities",
    },
    "hopper": {
        "position": "root z (metres) and pitch, then waist, hip, knee, ankle angles "
        "(radians); the horizontal position is left out",
        "velocity": _QVEL,
        "touch": _TOUCH + " (toe, heel)",
    },
    "humanoid": {
        "joint_angles": "the 21 joint angles (radians), the free root joint left out",
        "head_height": "height of the head above the floor (metres)",
        "extremities": "hands and feet positions in the torso's frame, left hand, left "
        "foot, right hand, right foot, x y z each (metres)",
        "torso_vertical": "the world z axis in the torso's frame (upright: [0, 0, 1])",
        "com_velocity": "centre-of-mass velocity x, y, z (m/s)",
        "velocity": _QVEL + ", the free root's six first",
    },
    "manipulator": {
        "arm_pos": "for each of the 8 arm and hand joints, [sin, cos] of its angle",
        "arm_vel": "the 8 joint velocities (rad/s, m/s for the finger slides)",
        "touch": _TOUCH + " (palm, finger, thumb, finger tip, thumb tip)",
        "hand_pos": "hand x, z (metres) and its orientation quaternion's w and y",
        "object_pos": "ball x, z (metres) and its orientation's w and y",
        "object_vel": "ball velocity x, z (m/s) and angular velocity (rad/s)",
        "target_pos": "target x, z (metres) and its orientation's w and y",
    },
    "pendulum": {
        "orientation": "cosine and sine of the pole's angle (cosine 1 = upright)",
        "velocity": "pole angular velocity (rad/s)",
    },
    "point_mass": {
        "position": "x, y of the mass (metres); the target is at the origin",
        "velocity": "x, y velocity (m/s)",
    },
    "reacher": {
        "position": "shoulder and wrist angles (radians)",
        "to_target": "x, y from the finger to the target (metres)",
        "velocity": "shoulder and wrist angular velocities (rad/s)",
    },
    "swimmer": {
        "joints": "the internal joint angles, head to tail (radians)",
        "to_target": "x, y from the nose to the target in the head's frame (metres)",
        "body_velocities": "for each body segment, its local x, y velocity (m/s) and "
        "z angular velocity (rad/s)",
    },
    "walker": {
        "orientations": "for each of the 7 bodies (torso, then right and left thigh, leg, "
        "foot), the xx and xz entries of its rotation: cosine and sine of its angle",
        "height": "torso height above the floor (metres)",
        "velocity": _QVEL + ", root x, z, pitch first",
    },
}


def _names(physics: Any, kind: str, count: int) -> list[str]:
    model = physics.model
    return [model.id2name(i, kind) or f"{kind}_{i}" for i in range(count)]


def _observation(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    meanings = DOMAINS.get(env.domain, {})
    parts: dict[str, dict[str, str]] = {
        name: {"description": meanings.get(name, "")} for name in env.observation_space.spaces
    }
    return {
        "description": (
            f"The suite's observation of {env.domain}-{env.task}: a dict of float64 arrays "
            f"(numpy), one per entry, as the suite's time step gives it. Control step "
            f"{env.control_timestep:g} s."
        ),
        "parts": parts,
    }


def _action(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    model = env.physics.model
    names = _names(env.physics, "actuator", model.nu)
    return {
        "description": "One control per actuator, applied for one control step; the "
        "suite scales each to its motor's gear. Values outside the bounds are invalid.",
        "names": names,
        "descriptions": [f"actuator {n} (motor or position control)" for n in names],
    }


def _extra(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "domain": env.domain,
        "task": env.task,
        "control_timestep_seconds": env.control_timestep,
    }


DMC = Texts(
    observation=_observation,
    action=_action,
    reward="the suite's per-step reward in [0, 1] (see the task description)",
    termination="the suite's time limit: truncated after 1000 control steps",
    horizon=lambda env: env.step_limit,
    extra=_extra,
    replay_kwargs={"width": 160, "height": 160},
    replay_frames=60,  # software GL draws a few dozen frames a second
    reuse=True,
)


def make_adapter() -> GymAdapter:
    return GymAdapter(
        "dmc",
        {f"dm_control/{domain}-{task}-v0": DMC for domain, task in BENCHMARKING},
        default=None,
        package="evopolicy_mcp.environments.dmc.env",
        extra="dmc",
        example_parameters={"env_id": "dm_control/cartpole-swingup-v0"},
    )
