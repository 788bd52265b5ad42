"""The ``box2d`` adapter: LunarLander, BipedalWalker and CarRacing (Gymnasium, Box2D).

Texts follow the environments' source in the pinned Gymnasium release; numbers
that a task can change (gravity, wind) are read from the live environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evopolicy_mcp.adapters.gym import GymAdapter, Kwarg, Tally, Texts

__all__ = ["CATALOG", "make_adapter"]


def _lander_obs(env: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    wind = (
        f" Wind is on (wind_power {s['wind_power']:g}, turbulence_power {s['turbulence_power']:g})."
        if s["enable_wind"]
        else ""
    )
    return {
        "description": "The lander's state, scaled by the environment; the landing pad is "
        f"at (0, 0) between two flags. Gravity {s['gravity']:g} m/s^2.{wind}",
        "names": [
            "x",
            "y",
            "vx",
            "vy",
            "angle",
            "angular_velocity",
            "left_leg_contact",
            "right_leg_contact",
        ],
        "descriptions": [
            "horizontal position relative to the pad centre, in half screen widths "
            "(-1 left edge, +1 right edge; leaving |x| >= 1 ends the episode)",
            "height above the pad, in half screen heights (about 1.4 at the start)",
            "horizontal velocity (scaled; positive = right)",
            "vertical velocity (scaled; positive = up)",
            "tilt in radians (0 = upright, positive = counter-clockwise)",
            "angular velocity (scaled)",
            "1.0 while the left leg touches the ground, else 0.0",
            "1.0 while the right leg touches the ground, else 0.0",
        ],
    }


def _lander_action(env: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    if s["continuous"]:
        return {
            "description": "[main, lateral] throttles. main < 0: main engine off; 0..1: "
            "50%..100% power. lateral in [-0.5, 0.5]: side engines off; below -0.5 fires "
            "the left engine, above 0.5 the right one (50%..100% power as |lateral| goes "
            "0.5..1).",
            "names": ["main", "lateral"],
            "descriptions": ["main engine throttle", "side engines throttle"],
        }
    return {
        "meanings": [
            "do nothing",
            "fire the left orientation engine (pushes the nose right, turning clockwise)",
            "fire the main engine (pushes up along the lander's axis)",
            "fire the right orientation engine (turns counter-clockwise)",
        ],
        "noop": 0,
    }


def _landed(t: Tally) -> dict[str, float]:
    return {
        "landed": float(t.terminated and t.last_reward == 100.0),
        "crashed": float(t.terminated and t.last_reward == -100.0),
    }


LANDER = Texts(
    observation=_lander_obs,
    action=_lander_action,
    reward="shaped: more for moving closer to the pad, slower and more upright (and less "
    "for moving away); +10 for each leg on the ground; -0.3 per step of main engine and "
    "-0.03 per step of a side engine; -100 for crashing or flying off screen, +100 for "
    "coming to rest. A return of 200 counts as solved",
    termination="terminated when the lander crashes (its body touches the ground), "
    "leaves the screen (|x| >= 1) or comes to rest; truncated after 1000 steps",
    metrics={
        "landed": "1.0 if the lander came to rest (the +100 ending), else 0.0",
        "crashed": "1.0 if it crashed or left the screen (the -100 ending), else 0.0",
    },
    outcome=_landed,
    kwargs={
        "continuous": Kwarg((bool,), False),
        "gravity": Kwarg((int, float), -10.0),
        "enable_wind": Kwarg((bool,), False),
        "wind_power": Kwarg((int, float), 15.0),
        "turbulence_power": Kwarg((int, float), 1.5),
    },
)

_WALKER_NAMES = [
    ("hull_angle", "hull angle, rad (0 = level)"),
    ("hull_angular_velocity", "hull angular velocity (scaled)"),
    ("vx", "horizontal velocity (scaled; positive = forward)"),
    ("vy", "vertical velocity (scaled)"),
    ("hip1_angle", "hip joint 1 angle, rad"),
    ("hip1_speed", "hip joint 1 speed (scaled)"),
    ("knee1_angle", "knee joint 1 angle, rad (+1 offset)"),
    ("knee1_speed", "knee joint 1 speed (scaled)"),
    ("leg1_contact", "1.0 while leg 1 touches the ground"),
    ("hip2_angle", "hip joint 2 angle, rad"),
    ("hip2_speed", "hip joint 2 speed (scaled)"),
    ("knee2_angle", "knee joint 2 angle, rad (+1 offset)"),
    ("knee2_speed", "knee joint 2 speed (scaled)"),
    ("leg2_contact", "1.0 while leg 2 touches the ground"),
] + [
    (
        f"lidar{i}",
        f"lidar ray {i} (from ahead-down to ahead-up): fraction of its length to the first hit, 1.0 = nothing",
    )
    for i in range(10)
]


def _walker_obs(env: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    terrain = (
        "hardcore terrain: stumps, pits and stairs" if s["hardcore"] else "gently rolling terrain"
    )
    return {
        "description": f"A two-legged walker on {terrain}. Hull, joints and leg contacts, "
        "then 10 lidar rays.",
        "names": [n for n, _ in _WALKER_NAMES],
        "descriptions": [d for _, d in _WALKER_NAMES],
    }


def _walker_outcome(t: Tally) -> dict[str, float]:
    fell = t.terminated and t.last_reward == -100.0
    return {"fell": float(fell), "finished": float(t.terminated and not fell)}


WALKER = Texts(
    observation=_walker_obs,
    action=lambda env, s: {
        "description": "Four motor speeds in [-1, 1]: torque is 80 x |value| toward the sign.",
        "names": ["hip1", "knee1", "hip2", "knee2"],
        "descriptions": [
            "hip 1 motor",
            "knee 1 motor",
            "hip 2 motor",
            "knee 2 motor",
        ],
    },
    reward="130 x forward progress of the hull (in screen units) minus 5 x the change in "
    "|hull angle|, minus 0.00035 x 80 x sum(|action|) per step; -100 if the hull touches "
    "the ground. Reaching the far end gives about +300 in all",
    termination="terminated when the hull touches the ground, the walker moves off the left "
    "edge, or reaches the far end; truncated after 1600 steps (2000 in hardcore)",
    metrics={
        "fell": "1.0 if the walker fell (the -100 ending), else 0.0",
        "finished": "1.0 if it reached the far end, else 0.0",
    },
    outcome=_walker_outcome,
    kwargs={"hardcore": Kwarg((bool,), False)},
)


def _racing_action(env: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    if s["continuous"]:
        return {
            "description": "[steer, gas, brake]",
            "names": ["steer", "gas", "brake"],
            "descriptions": [
                "steering, -1 full left to +1 full right",
                "throttle, 0 to 1",
                "brake, 0 to 1",
            ],
        }
    return {
        "meanings": ["do nothing", "steer left", "steer right", "gas", "brake"],
        "noop": 0,
    }


RACING = Texts(
    observation=lambda env, s: {
        "description": "A 96x96 RGB image [row][col][channel] (uint8), top-down and "
        "centred on the car, which points up. The bottom 12 rows show true speed (white "
        "bar), four ABS sensors (blue), steering (green) and gyroscope (red). The track "
        "(grey) is generated per episode; grass is green."
    },
    action=_racing_action,
    reward="-0.1 per step, +1000/N for each of the N track tiles the first time the car "
    "drives over it (so a full lap in T steps scores 1000 - 0.1 T); -100 for driving far "
    "off the playfield",
    termination="terminated when every tile has been visited (a lap) or the car leaves "
    "the playfield; truncated after 1000 steps",
    metrics={
        "lap": "1.0 if the car completed a lap, else 0.0",
        "lost": "1.0 if the car left the playfield (the -100 ending), else 0.0",
    },
    outcome=lambda t: {
        "lap": float(bool(t.info.get("lap_finished"))),
        "lost": float(t.terminated and not t.info.get("lap_finished")),
    },
    kwargs={
        "continuous": Kwarg((bool,), True),
        "lap_complete_percent": Kwarg((int, float), 0.95),
        "domain_randomize": Kwarg((bool,), False),
    },
    # It rasterises each step to make the observation: a replay re-plays every step.
    replay_frames=60,
)

CATALOG: dict[str, Texts] = {
    "LunarLander-v3": LANDER,
    "BipedalWalker-v3": WALKER,
    "CarRacing-v3": RACING,
}


def make_adapter() -> GymAdapter:
    return GymAdapter(
        "box2d",
        CATALOG,
        default=None,
        extra="box2d",
        example_parameters={"env_id": "LunarLander-v3"},
    )
