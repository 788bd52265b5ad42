"""The ``highway`` adapter: HighwayEnv's driving scenes, with their texts.

The observation's rows and features, the meta-actions and the step length are
read from the scene's live configuration (``config``), so a task that changes
it (more vehicles, other features) is described as it runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evopolicy_mcp.adapters.gym import GymAdapter, Tally, Texts

__all__ = ["HIGHWAY", "make_adapter"]

FEATURES = {
    "presence": "1 if a vehicle fills this row, else 0 (rows beyond the nearest vehicles are 0)",
    "x": "longitudinal position",
    "y": "lateral position",
    "vx": "longitudinal velocity",
    "vy": "lateral velocity",
    "heading": "heading angle, rad",
    "cos_h": "cosine of the heading",
    "sin_h": "sine of the heading",
    "cos_d": "cosine of the direction to the destination",
    "sin_d": "sine of the direction to the destination",
    "long_off": "longitudinal offset from the lane's centre",
    "lat_off": "lateral offset from the lane's centre",
    "ang_off": "heading offset from the lane's direction",
    "on_road": "1 where the cell is on the road",
}
META = {
    "LANE_LEFT": "change to the lane on the left",
    "IDLE": "keep lane and speed",
    "LANE_RIGHT": "change to the lane on the right",
    "FASTER": "speed up (to the next target speed)",
    "SLOWER": "slow down (to the previous target speed)",
}


def _observation(env: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    config = env.config["observation"]
    kind = config.get("type")
    obs = env.observation_type
    if kind in ("Kinematics", "ExitObservation"):
        features = list(getattr(obs, "features", []))
        rows = getattr(obs, "vehicles_count", None)
        frame = (
            "absolute"
            if getattr(obs, "absolute", False)
            else "relative to the ego vehicle (row 0 stays absolute)"
        )
        scale = (
            "normalised to about [-1, 1] by features_range "
            + str(getattr(obs, "features_range", None) or "(set per scene)")
            if getattr(obs, "normalize", False)
            else "in metres and m/s"
        )
        return {
            "description": f"A {rows} x {len(features)} table: row 0 is the ego vehicle, the "
            f"next rows the nearest vehicles, ordered by distance. Columns: "
            + "; ".join(f"{f}: {FEATURES.get(f, f)}" for f in features)
            + f". Coordinates are {frame}, {scale}. x points along the road, y to the right."
        }
    if kind == "TimeToCollision":
        return {
            "description": f"time-to-collision grid [speed][lane][time]: for each of 3 ego "
            f"target speeds (slower, same, faster), each of 3 lanes (left, own, right) and "
            f"{obs.horizon} one-second time steps ahead, 1 where a collision would happen "
            "at that time if the ego kept that speed and lane, else 0"
        }
    if kind == "KinematicsGoal":
        features = list(obs.features)
        return {
            "description": "the ego car's state, the goal state and the state reached, each "
            f"[{', '.join(features)}] scaled by {list(obs.scales)}: x, y position (m), vx, "
            "vy velocity (m/s), heading cos/sin",
        }
    if kind == "OccupancyGrid":
        return {
            "description": f"an occupancy grid [feature][row][col] around the ego vehicle "
            f"(aligned with it), cells of {obs.grid_step} m over {obs.grid_size} m; features "
            + ", ".join(f"{f}: {FEATURES.get(f, f)}" for f in obs.features)
        }
    if kind == "AttributesObservation":
        return {
            "description": "the vehicle's lateral dynamics: state, its time derivative and the "
            "reference state, each a 4x1 column [lateral position, heading, lateral velocity, "
            "yaw rate]"
        }
    return {"description": f"a {kind} observation of the scene"}


def _action(env: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    action = env.action_type
    actions = getattr(action, "actions", None)
    if actions:
        names = [actions[i] for i in range(len(actions))]
        found: dict[str, Any] = {"meanings": [f"{n}: {META.get(n, n)}" for n in names]}
        if "IDLE" in names:
            found["noop"] = names.index("IDLE")
        return found
    parts = []
    if getattr(action, "longitudinal", False):
        parts.append(("acceleration", "throttle, -1 full braking to +1 full acceleration"))
    if getattr(action, "lateral", False):
        parts.append(("steering", "steering, -1 full left to +1 full right"))
    if len(parts) != int(env.action_space.shape[0]):
        return {"description": "continuous controls in [-1, 1]"}
    return {
        "description": "continuous controls in [-1, 1], scaled to the vehicle's limits",
        "names": [n for n, _ in parts],
        "descriptions": [d for _, d in parts],
    }


def _outcome(t: Tally) -> dict[str, float]:
    crashed = bool(t.info.get("crashed", False))
    return {"crashed": float(crashed), "success": float(bool(t.info.get("is_success", False)))}


HIGHWAY = Texts(
    observation=_observation,
    action=_action,
    reward="per step, about 0 to 1: a weighted sum of the scene's terms (high speed, right "
    "lane, reaching the goal or exit, staying on the road) with a penalty for collisions; "
    "metadata.reward_config holds the weights in force",
    termination="terminated on a collision (or, in some scenes, leaving the road or "
    "reaching the goal); truncated when the scene's duration runs out",
    metrics={
        "crashed": "1.0 if the ego vehicle crashed, else 0.0",
        "success": "1.0 where the scene reports success (parking, exit), else 0.0",
    },
    outcome=_outcome,
    extra=lambda env, s: {
        "policy_frequency_hz": env.config.get("policy_frequency"),
        "duration": env.config.get("duration"),
        "reward_config": {
            k: v
            for k, v in env.config.items()
            if k.endswith("_reward")
            or k.endswith("_cost")
            or k in ("reward_speed_range", "normalize_reward")
        },
    },
    replay_frames=60,
)


def make_adapter() -> GymAdapter:
    return GymAdapter(
        "highway",
        default=HIGHWAY,
        package="highway_env",
        extra="highway",
        example_parameters={"env_id": "highway-fast-v0"},
    )
