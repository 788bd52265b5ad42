"""The ``mujoco`` adapter: Gymnasium's eleven MuJoCo v5 environments, with their texts.

Observation components are named from the live model (joint and body names,
what each coordinate measures, in SI units), actions by the joint each motor
drives, and the reward and termination texts read the environment's own
weights and ranges, so every number shown is the one in force.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from evopolicy_mcp.adapters.gym import GymAdapter, Tally, Texts

__all__ = ["CATALOG", "make_adapter"]

Segment = tuple[str, int]  # (what, how many leading entries are left out)


def _joint_coordinates(model: Any, velocity: bool) -> list[tuple[str, str]]:
    """(name, meaning) of every qpos (or qvel) entry, from the model's joints."""
    import mujoco

    out: list[tuple[str, str]] = []
    for j in range(model.njnt):
        name, kind = model.joint(j).name or f"joint{j}", model.jnt_type[j]
        if kind == mujoco.mjtJoint.mjJNT_FREE:
            if velocity:
                out += [(f"{name}_v{a}", f"{a} velocity of the torso, m/s") for a in "xyz"]
                out += [(f"{name}_w{a}", f"angular velocity about {a}, rad/s") for a in "xyz"]
            else:
                out += [(f"{name}_{a}", f"{a} position of the torso, m") for a in "xyz"]
                out += [(f"{name}_q{a}", f"torso orientation quaternion {a}") for a in "wxyz"]
        elif kind == mujoco.mjtJoint.mjJNT_BALL:
            raise ValueError("ball joints are not used by these models")
        else:
            slide = kind == mujoco.mjtJoint.mjJNT_SLIDE
            unit = ("m/s" if slide else "rad/s") if velocity else ("m" if slide else "rad")
            what = "velocity" if velocity else ("position" if slide else "angle")
            out.append((f"{name}_{'vel' if velocity else 'pos'}", f"{name} joint {what}, {unit}"))
    return out


def _bodies(model: Any) -> list[str]:
    return [model.body(b).name or f"body{b}" for b in range(1, model.nbody)]


def _segments(env: Any, segments: list[Segment]) -> list[tuple[str, str]]:
    model = env.model
    out: list[tuple[str, str]] = []
    for what, skip in segments:
        if what == "qpos":
            out += _joint_coordinates(model, False)[skip:]
        elif what == "qvel":
            out += _joint_coordinates(model, True)[skip:]
        elif what == "cinert":
            out += [
                (f"{b}_inertia{i}", f"{b}: mass and inertia (body frame), entry {i} of 10")
                for b in _bodies(model)
                for i in range(10)
            ]
        elif what == "cvel":
            out += [
                (f"{b}_cvel{i}", f"{b}: centre-of-mass velocity, entry {i} of 6 (rad/s, m/s)")
                for b in _bodies(model)
                for i in range(6)
            ]
        elif what == "qfrc_actuator":
            out += [
                (f"{n}_actuator_force", f"actuator force on {n}")
                for n, _ in _joint_coordinates(model, True)[skip:]
            ]
        elif what == "cfrc_ext":
            out += [
                (f"{b}_contact{i}", f"{b}: external contact force/torque, entry {i} of 6")
                for b in _bodies(model)
                for i in range(6)
            ]
    return out


def _named(parts: list[tuple[str, str]], description: str) -> dict[str, Any]:
    return {
        "description": description,
        "names": [n for n, _ in parts],
        "descriptions": [d for _, d in parts],
    }


NAMED_MOST = 64  # longer observations are described by index ranges, not per component
PER_BODY = {"cinert": 10, "cvel": 6, "cfrc_ext": 6}


def _layout(env: Any, segments: list[Segment]) -> str:
    """obs[a:b] ranges, one per segment, with the names (or bodies) each covers."""
    out, start = [], 0
    for what, skip in segments:
        parts = _segments(env, [(what, skip)])
        end = start + len(parts)
        if what in PER_BODY:
            bodies = ", ".join(_bodies(env.model))
            text = {
                "cinert": "mass and inertia per body (10 each)",
                "cvel": "centre-of-mass velocity per body (6 each: rad/s, m/s)",
                "cfrc_ext": "external contact force and torque per body (6 each)",
            }[what]
            out.append(f"obs[{start}:{end}] {text}, bodies in order: {bodies}")
        else:
            out.append(f"obs[{start}:{end}] " + "; ".join(f"{n} ({d})" for n, d in parts))
        start = end
    return ". ".join(out)


def _from_model(segments: list[Segment], description: str) -> Callable[..., dict[str, Any]]:
    def describe(env: Any, s: Mapping[str, Any]) -> dict[str, Any]:
        parts = _segments(env, segments)
        if len(parts) <= NAMED_MOST:
            return _named(parts, description)
        return {"description": f"{description} Layout: {_layout(env, segments)}."}

    return describe


def _fixed(parts: list[tuple[str, str]], description: str) -> Callable[..., dict[str, Any]]:
    return lambda env, s: _named(parts, description)


def _motors(env: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    model = env.model
    names, texts = [], []
    for i in range(model.nu):
        joint = model.joint(int(model.actuator_trnid[i][0])).name
        low, high = model.actuator_ctrlrange[i]
        names.append(joint)
        texts.append(
            f"motor on {joint}: torque = {model.actuator_gear[i][0]:g} x action "
            f"(action in [{low:g}, {high:g}])"
        )
    return {
        "description": f"A list of {model.nu} numbers, one per motor; out-of-range values are "
        "invalid actions (never clipped).",
        "names": names,
        "descriptions": texts,
    }


def _w(env: Any, name: str) -> str:
    return f"{getattr(env, name):g}"


def _locomotion(env: Any, contact: bool, extra: str = "") -> str:
    text = (
        f"{_w(env, '_forward_reward_weight')} x forward velocity of the torso (m/s, +x) - "
        f"{_w(env, '_ctrl_cost_weight')} x sum(action^2)"
    )
    if hasattr(env, "_healthy_reward"):
        text = f"{_w(env, '_healthy_reward')} while healthy + " + text
    if contact:
        text += f" - {_w(env, '_contact_cost_weight')} x sum(contact force^2)"
    return f"per step (dt = {env.dt:g} s): {text}{extra}"


def _health(env: Any) -> str:
    parts = []
    if hasattr(env, "_healthy_z_range"):
        low, high = env._healthy_z_range
        parts.append(f"torso height z leaves [{low:g}, {high:g}] m")
    if hasattr(env, "_healthy_angle_range"):
        low, high = env._healthy_angle_range
        parts.append(f"torso angle leaves [{low:g}, {high:g}] rad")
    if hasattr(env, "_healthy_state_range"):
        low, high = env._healthy_state_range
        parts.append(f"any other state entry leaves [{low:g}, {high:g}]")
    return "terminated when unhealthy: " + " or ".join(parts) + "; truncated after 1000 steps"


def _distance(t: Tally) -> dict[str, float]:
    x = t.info.get("x_position")
    return {"x_position": float(x) if x is not None else 0.0}


# MuJoCo renders with software OpenGL on a machine without a GPU (~20-40 ms a frame at
# this size): a replay draws fewer, smaller frames than the kit's default.
REPLAY = {"width": 128, "height": 128}
REPLAY_FRAMES = 40
ENDLESS = "never terminates; truncated after 1000 steps"
DISTANCE = {"x_position": "the torso's final x position in m (the start is near 0)"}
LIVED = {"fell": "1.0 if the episode ended by falling (terminated), else 0.0"}


Rules = Callable[[Any], tuple[str, str]]  # unwrapped env -> (reward, termination)


def _texts(
    observation: Callable[..., dict[str, Any]],
    metrics: dict[str, str],
    outcome: Callable[[Tally], dict[str, float]],
    rules: Rules,
) -> Texts:
    """An entry of the catalogue: motors as the action, reward and termination texts
    read from the live environment, small replays."""

    def extra(env: Any, s: Mapping[str, Any]) -> dict[str, Any]:
        reward, termination = rules(env)
        return {"reward": reward, "termination": termination, "dt_seconds": env.dt}

    return Texts(
        observation=observation,
        action=_motors,
        metrics=metrics,
        outcome=outcome,
        extra=extra,
        replay_kwargs=REPLAY,
        replay_frames=REPLAY_FRAMES,
    )


def _walker(
    segments: list[Segment],
    description: str,
    contact: bool = False,
    falls: bool = True,
) -> Texts:
    return _texts(
        _from_model(segments, description),
        {**DISTANCE, **(LIVED if falls else {})},
        lambda t: {**_distance(t), **({"fell": float(t.terminated)} if falls else {})},
        lambda env: (_locomotion(env, contact), _health(env) if falls else ENDLESS),
    )


PLANAR = "positions exclude the torso's x (moving forward is what is rewarded)"
CATALOG: dict[str, Texts] = {
    "HalfCheetah-v5": _walker(
        [("qpos", 1), ("qvel", 0)],
        f"A planar cheetah: 8 joint positions ({PLANAR}), then 9 velocities.",
        falls=False,
    ),
    "Hopper-v5": _walker(
        [("qpos", 1), ("qvel", 0)],
        f"A planar one-legged hopper: 5 positions ({PLANAR}), then 6 velocities (clipped to [-10, 10]).",
    ),
    "Walker2d-v5": _walker(
        [("qpos", 1), ("qvel", 0)],
        f"A planar biped: 8 positions ({PLANAR}), then 9 velocities (clipped to [-10, 10]).",
    ),
    "Swimmer-v5": _walker(
        [("qpos", 2), ("qvel", 0)],
        "A three-link swimmer in a viscous fluid: 3 angles (the tip's x and y are left out), then 5 velocities.",
        falls=False,
    ),
    "Ant-v5": _walker(
        [("qpos", 2), ("qvel", 0), ("cfrc_ext", 0)],
        "A four-legged ant: torso z, orientation quaternion and 8 joint angles (x and y left out), 14 velocities, then the external contact forces of 13 bodies (6 each).",
        contact=True,
    ),
    "Humanoid-v5": _walker(
        [
            ("qpos", 2),
            ("qvel", 0),
            ("cinert", 0),
            ("cvel", 0),
            ("qfrc_actuator", 6),
            ("cfrc_ext", 0),
        ],
        "A 3-D humanoid: 22 positions (torso x and y left out), 23 velocities, then per body its inertia (10 each), centre-of-mass velocity (6 each), the 17 actuator forces and the external contact forces (6 each).",
        contact=True,
    ),
}


def _standup(env: Any) -> tuple[str, str]:
    return (
        f"per step (dt = {env.dt:g} s): {_w(env, '_uph_cost_weight')} x upward torso "
        f"position z / dt + 1 - {_w(env, '_ctrl_cost_weight')} x sum(action^2) - "
        f"{_w(env, '_impact_cost_weight')} x sum(contact force^2) (at most 10)",
        ENDLESS,
    )


CATALOG["HumanoidStandup-v5"] = _texts(
    observation=_from_model(
        [
            ("qpos", 2),
            ("qvel", 0),
            ("cinert", 0),
            ("cvel", 0),
            ("qfrc_actuator", 6),
            ("cfrc_ext", 0),
        ],
        "A 3-D humanoid lying on the ground; same layout as Humanoid-v5: 22 positions, 23 velocities, inertias, centre-of-mass velocities, 17 actuator forces, contact forces.",
    ),
    metrics={"height_gain": "how far the torso rose from its start height by the end, m"},
    outcome=lambda t: {"height_gain": float(t.info.get("z_distance_from_origin", 0.0))},
    rules=_standup,
)
CATALOG["Reacher-v5"] = _texts(
    observation=_fixed(
        [
            ("cos_joint0", "cosine of the first arm joint's angle"),
            ("cos_joint1", "cosine of the second arm joint's angle"),
            ("sin_joint0", "sine of the first arm joint's angle"),
            ("sin_joint1", "sine of the second arm joint's angle"),
            ("target_x", "target x position, m"),
            ("target_y", "target y position, m"),
            ("joint0_vel", "first joint's angular velocity, rad/s"),
            ("joint1_vel", "second joint's angular velocity, rad/s"),
            ("tip_to_target_x", "fingertip x minus target x, m"),
            ("tip_to_target_y", "fingertip y minus target y, m"),
        ],
        "A two-joint arm on a plane and a random target within 0.2 m of its base.",
    ),
    metrics={"final_distance": "distance from fingertip to target at the end, m"},
    outcome=lambda t: {"final_distance": -float(t.info.get("reward_dist", 0.0))},
    rules=lambda env: (
        f"per step: -{_w(env, '_reward_dist_weight')} x distance(fingertip, target) "
        f"in m - {_w(env, '_reward_control_weight')} x sum(action^2)",
        "never terminates; truncated after 50 steps",
    ),
)
CATALOG["Pusher-v5"] = _texts(
    observation=_fixed(
        [(f"joint{i}_angle", f"arm joint {i} angle, rad") for i in range(7)]
        + [(f"joint{i}_vel", f"arm joint {i} angular velocity, rad/s") for i in range(7)]
        + [(f"fingertip_{a}", f"fingertip {a} position, m") for a in "xyz"]
        + [(f"object_{a}", f"object {a} position, m") for a in "xyz"]
        + [(f"goal_{a}", f"goal {a} position, m") for a in "xyz"],
        "A seven-joint arm that must push a cylinder to a goal on the table.",
    ),
    metrics={"object_to_goal": "distance from the object to the goal at the end, m"},
    outcome=lambda t: {"object_to_goal": -float(t.info.get("reward_dist", 0.0))},
    rules=lambda env: (
        f"per step: -{_w(env, '_reward_near_weight')} x distance(fingertip, object) - "
        f"{_w(env, '_reward_dist_weight')} x distance(object, goal) - "
        f"{_w(env, '_reward_control_weight')} x sum(action^2), distances in m",
        "never terminates; truncated after 100 steps",
    ),
)
CATALOG["InvertedPendulum-v5"] = _texts(
    observation=_fixed(
        [
            ("cart_position", "cart position along the rail, m"),
            ("pole_angle", "pole angle from upright, rad"),
            ("cart_velocity", "cart velocity, m/s"),
            ("pole_angular_velocity", "pole angular velocity, rad/s"),
        ],
        "A pole hinged on a cart on a rail; everything starts within 0.01 of 0.",
    ),
    metrics={"success": "1.0 if the pole stayed up for all 1000 steps, else 0.0"},
    outcome=lambda t: {"success": float(t.truncated and not t.terminated)},
    rules=lambda env: (
        "+1 for every step the pole is upright (|angle| <= 0.2 rad)",
        "terminated when |pole_angle| > 0.2 rad; truncated after 1000 steps",
    ),
)
CATALOG["InvertedDoublePendulum-v5"] = _texts(
    observation=_fixed(
        [
            ("cart_position", "cart position along the rail, m"),
            ("sin_hinge1", "sine of the first pole's angle from upright"),
            ("sin_hinge2", "sine of the second pole's angle relative to the first"),
            ("cos_hinge1", "cosine of the first pole's angle"),
            ("cos_hinge2", "cosine of the second pole's angle"),
            ("cart_velocity", "cart velocity, m/s (clipped to [-10, 10])"),
            ("hinge1_velocity", "first pole's angular velocity, rad/s (clipped to [-10, 10])"),
            ("hinge2_velocity", "second pole's angular velocity, rad/s (clipped to [-10, 10])"),
            ("constraint_force", "constraint force on the cart (clipped to [-10, 10])"),
        ],
        "Two poles stacked on a cart on a rail.",
    ),
    metrics={"success": "1.0 if the poles stayed up for all 1000 steps, else 0.0"},
    outcome=lambda t: {"success": float(t.truncated and not t.terminated)},
    rules=lambda env: (
        f"per step: {_w(env, '_healthy_reward')} - 0.01 x tip_x^2 - (tip_y - 2)^2 "
        "- 0.001 x hinge1_velocity^2 - 0.005 x hinge2_velocity^2 (tip position in m)",
        "terminated when the tip of the second pole is at or below y = 1 m; "
        "truncated after 1000 steps",
    ),
)


def make_adapter() -> GymAdapter:
    return GymAdapter(
        "mujoco",
        CATALOG,
        default=None,
        extra="mujoco",
        example_parameters={"env_id": "HalfCheetah-v5"},
    )
