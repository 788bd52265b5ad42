"""What the Gymnasium adapter tells a controller writer about each environment.

One entry per supported environment id: component names and meanings of the
observation and action spaces, rewards, termination, the constructor
arguments a task may set, and the public per-episode metrics. The spaces
themselves (bounds, sizes) come from the live environment, so they cannot
drift from what Gymnasium does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from evopolicy_mcp.adapters.gym import Kwarg, Tally, Texts

__all__ = ["CATALOG"]


def _flag(value: bool) -> float:
    return 1.0 if value else 0.0


def _reached(t: Tally) -> dict[str, float]:
    return {"success": _flag(t.terminated)}


SUCCESS_BY_TERMINATION = {"success": "1.0 if the episode reached its goal (terminated), else 0.0"}


def _cartpole_obs(env: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    x, deg = env.x_threshold, math.degrees(env.theta_threshold_radians)
    return {
        "description": "Cart-pole state. All four values start uniform in [-0.05, 0.05].",
        "names": ["cart_position", "cart_velocity", "pole_angle", "pole_angular_velocity"],
        "descriptions": [
            f"cart position on the track in metres, 0 = centre; terminates when |x| > {x}",
            "cart velocity in m/s, positive = moving right",
            "pole angle from vertical in radians, positive = leaning right; terminates when "
            f"|angle| > {env.theta_threshold_radians:.4f} ({deg:.0f} degrees)",
            "pole angular velocity in rad/s, positive = falling to the right",
        ],
    }


def _grid_meanings(names: list[str]) -> dict[str, Any]:
    return {"meanings": [f"move {n}" for n in names]}


def _frozenlake_obs(env: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    rows = [bytes(r).decode() for r in env.desc]
    slip = (
        "slippery: the agent moves in the intended direction with probability 1/3, "
        "otherwise to one of the two perpendicular directions with equal probability"
        if s["is_slippery"]
        else "not slippery: moves go where intended"
    )
    return {
        "description": (
            f"Current cell as row * {env.ncol} + col (row 0 at the top). Map "
            f"({env.nrow}x{env.ncol}; S start, F frozen, H hole, G goal), rows top to bottom: "
            f"{' / '.join(rows)}. The ice is {slip}. Moves off the edge keep the agent in place."
        )
    }


def _taxi_obs(env: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    weather = (
        " Rainy: moves go as intended with probability 0.8, otherwise sideways."
        if s["is_rainy"]
        else ""
    )
    fickle = (
        " Fickle passenger: with probability 0.3 the destination changes once, on the "
        "first move after pick-up."
        if s["fickle_passenger"]
        else ""
    )
    return {
        "description": (
            "State = ((taxi_row * 5 + taxi_col) * 5 + passenger_location) * 4 + destination, "
            "on a 5x5 grid (row 0 at the top). passenger_location: 0 R (0,0), 1 G (0,4), "
            "2 Y (4,0), 3 B (4,3), 4 in the taxi; destination: 0-3 the same pads. Map with walls "
            "('|' blocks east-west moves): +---------+ |R: | : :G| | : | : : | | : : : : | "
            "| | : | : | |Y| : |B: | +---------+. The taxi starts at a random cell, the "
            "passenger at a pad other than the destination." + weather + fickle
        )
    }


def _cliff_obs(env: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    slip = (
        " Slippery: each move goes in the intended direction with probability 1/3, otherwise "
        "in one of the two perpendicular directions (1/3 each)."
        if s["is_slippery"]
        else ""
    )
    return {
        "description": (
            "Current cell as row * 12 + col on a 4x12 grid (row 0 at the top). Start 36 "
            "(row 3, col 0), goal 47 (row 3, col 11); the cliff is row 3, cols 1-10 "
            "(cells 37-46): stepping into it costs -100 and sends the agent back to the start. "
            "Moves off the edge keep the agent in place." + slip
        )
    }


_BLACKJACK_OBS = {
    "description": "[player_sum, dealer_card, usable_ace]. Infinite deck; the dealer draws "
    "until reaching 17 or more after you stick.",
    "parts": [
        {
            "description": "player_sum: current sum of your hand (4-21 during play; an ace counts 11 "
            "when that does not bust you)"
        },
        {
            "description": "dealer_card: value of the dealer's face-up card, 1 = ace, 10 = ten or face"
        },
        {"description": "usable_ace: 1 if you hold an ace counted as 11, else 0"},
    ],
}


def _blackjack_outcome(t: Tally) -> dict[str, float]:
    done = t.terminated
    return {
        "win": _flag(done and t.last_reward > 0),
        "draw": _flag(done and t.last_reward == 0),
        "loss": _flag(done and t.last_reward < 0),
    }


CATALOG: dict[str, Texts] = {
    "CartPole-v1": Texts(
        observation=_cartpole_obs,
        action=lambda env, s: {
            "meanings": [
                f"push the cart left (force -{env.force_mag} N)",
                f"push the cart right (force +{env.force_mag} N)",
            ]
        },
        reward="+1 for every step, including the terminating one (with sutton_barto_reward: "
        "0 per step and -1 on termination); the best return is the step limit",
        termination="terminated when |pole_angle| > 0.2094 rad or |cart_position| > 2.4; "
        "truncated at the step limit",
        metrics={"success": "1.0 if the pole stayed up until the step limit, else 0.0"},
        outcome=lambda t: {"success": _flag(t.truncated and not t.terminated)},
        kwargs={"sutton_barto_reward": Kwarg((bool,), False)},
    ),
    "Acrobot-v1": Texts(
        observation=lambda env, s: {
            "description": "Two links hanging from a fixed pivot; theta1 is the angle of the "
            "first link from pointing straight down, theta2 the angle of the second link "
            "relative to the first. The start state is uniform in [-0.1, 0.1] for all four "
            "angles and velocities (hanging down, nearly still).",
            "names": [
                "cos_theta1",
                "sin_theta1",
                "cos_theta2",
                "sin_theta2",
                "theta1_velocity",
                "theta2_velocity",
            ],
            "descriptions": [
                "cosine of theta1 (1 = first link pointing down)",
                "sine of theta1",
                "cosine of theta2 (1 = links aligned)",
                "sine of theta2",
                "angular velocity of theta1 in rad/s, within +-4*pi",
                "angular velocity of theta2 in rad/s, within +-9*pi",
            ],
        },
        action=lambda env, s: {
            "meanings": [
                "torque -1 on the joint between the links",
                "no torque",
                "torque +1 on the joint between the links",
            ]
        },
        reward="-1 per step until the goal, 0 on the step that reaches it",
        termination="terminated when the free end rises one link length above the pivot: "
        "-cos(theta1) - cos(theta1 + theta2) > 1.0; truncated at the step limit",
        metrics={"success": "1.0 if the free end swung up to the target height, else 0.0"},
        outcome=_reached,
    ),
    "MountainCar-v0": Texts(
        observation=lambda env, s: {
            "description": "A car in a valley; height at position x is sin(3x). Start: "
            "position uniform in [-0.6, -0.4], velocity 0. Each step: velocity += "
            "(action - 1) * 0.001 - 0.0025 * cos(3 * position), clipped to [-0.07, 0.07]; "
            "position += velocity, clipped to [-1.2, 0.6]; hitting the left end stops the car.",
            "names": ["position", "velocity"],
            "descriptions": [
                f"position along the x axis; the goal flag is at {env.goal_position}",
                "velocity, positive = moving right",
            ],
        },
        action=lambda env, s: {
            "meanings": ["accelerate left", "do not accelerate", "accelerate right"]
        },
        reward="-1 per step",
        termination="terminated when position >= 0.5 (the flag) with velocity >= goal_velocity "
        "(default 0); truncated at the step limit",
        metrics={"success": "1.0 if the car reached the flag, else 0.0"},
        outcome=_reached,
        kwargs={"goal_velocity": Kwarg((int, float), 0.0)},
    ),
    "MountainCarContinuous-v0": Texts(
        observation=lambda env, s: {
            "description": "A car in a valley; height at position x is sin(3x). Start: "
            "position uniform in [-0.6, -0.4], velocity 0. Each step: velocity += force * "
            "0.0015 - 0.0025 * cos(3 * position), clipped to [-0.07, 0.07]; position += velocity, "
            "clipped to [-1.2, 0.6].",
            "names": ["position", "velocity"],
            "descriptions": [
                f"position along the x axis; the goal flag is at {env.goal_position}",
                "velocity, positive = moving right",
            ],
        },
        action=lambda env, s: {
            "description": "A list of one number: the force.",
            "names": ["force"],
            "descriptions": ["engine force, -1 (full left) to 1 (full right)"],
        },
        reward="-0.1 * force^2 per step, plus 100 on the step that reaches the flag",
        termination="terminated when position >= 0.45 (the flag) with velocity >= goal_velocity "
        "(default 0); truncated at the step limit",
        metrics={"success": "1.0 if the car reached the flag, else 0.0"},
        outcome=_reached,
        kwargs={"goal_velocity": Kwarg((int, float), 0.0)},
    ),
    "Pendulum-v1": Texts(
        observation=lambda env, s: {
            "description": "A pendulum on a motorised pivot; theta is its angle from upright "
            "(0 = up, positive = counter-clockwise). Start: theta uniform in [-pi, pi], angular "
            f"velocity uniform in [-1, 1]. Dynamics: g = {env.g}, m = 1, l = 1, dt = 0.05; "
            "velocity += (3 g / 2 * sin(theta) + 3 * torque) * dt, clipped to [-8, 8]; "
            "theta += velocity * dt.",
            "names": ["cos_theta", "sin_theta", "angular_velocity"],
            "descriptions": [
                "cosine of theta (1 = upright)",
                "sine of theta",
                "angular velocity in rad/s, within [-8, 8]",
            ],
        },
        action=lambda env, s: {
            "description": "A list of one number: the torque.",
            "names": ["torque"],
            "descriptions": ["torque on the pivot in N m, within [-2, 2]"],
        },
        reward="-(theta^2 + 0.1 * angular_velocity^2 + 0.001 * torque^2) per step, theta "
        "normalised to [-pi, pi]; between -16.27 and 0",
        termination="never terminates; truncated at the step limit",
        metrics={
            "upright_fraction": "fraction of steps that ended with |theta| < 0.2 rad (near upright)"
        },
        outcome=lambda t: {"upright_fraction": t.counts.get("upright", 0) / max(t.steps, 1)},
        kwargs={"g": Kwarg((int, float), 10.0)},
        counters={"upright": lambda obs, r, info: float(obs[0]) > math.cos(0.2)},
    ),
    "FrozenLake-v1": Texts(
        observation=_frozenlake_obs,
        action=lambda env, s: _grid_meanings(["left", "down", "right", "up"]),
        reward="1 on reaching the goal G, 0 otherwise",
        termination="terminated on reaching G or falling into a hole H; truncated at the step limit",
        metrics={
            "success": "1.0 if the agent reached the goal, else 0.0",
            "hole": "1.0 if the agent fell into a hole, else 0.0",
        },
        outcome=lambda t: {
            "success": _flag(t.terminated and t.last_reward > 0),
            "hole": _flag(t.terminated and t.last_reward <= 0),
        },
        kwargs={
            "map_name": Kwarg((str,), "4x4", ("4x4", "8x8")),
            "is_slippery": Kwarg((bool,), True),
        },
        extra=lambda env, s: {"map": [bytes(r).decode() for r in env.desc]},
    ),
    "Taxi-v3": Texts(
        observation=_taxi_obs,
        action=lambda env, s: {
            "meanings": [
                "move south (down)",
                "move north (up)",
                "move east (right)",
                "move west (left)",
                "pick up the passenger",
                "drop off the passenger",
            ]
        },
        reward="-1 per step, +20 for delivering the passenger, -10 for an illegal pick-up or "
        "drop-off (moving into a wall only costs the step; dropping the passenger at another "
        "pad is legal and leaves them there)",
        termination="terminated when the passenger is dropped off at the destination; "
        "truncated at the step limit",
        metrics={
            **SUCCESS_BY_TERMINATION,
            "illegal_actions": "number of illegal pick-up / drop-off actions",
        },
        outcome=lambda t: {
            "success": _flag(t.terminated),
            "illegal_actions": float(t.counts.get("illegal", 0)),
        },
        kwargs={
            "is_rainy": Kwarg((bool,), False),
            "fickle_passenger": Kwarg((bool,), False),
        },
        counters={"illegal": lambda obs, r, info: r == -10},
    ),
    "CliffWalking-v1": Texts(
        observation=_cliff_obs,
        action=lambda env, s: _grid_meanings(["up", "right", "down", "left"]),
        reward="-1 per step; -100 for stepping into the cliff (which returns the agent to start)",
        termination="terminated on reaching the goal (cell 47); truncated at the step limit",
        metrics={
            **SUCCESS_BY_TERMINATION,
            "cliff_falls": "number of times the agent stepped into the cliff",
        },
        outcome=lambda t: {
            "success": _flag(t.terminated),
            "cliff_falls": float(t.counts.get("cliff", 0)),
        },
        kwargs={"is_slippery": Kwarg((bool,), False)},
        counters={"cliff": lambda obs, r, info: r == -100},
        default_max_steps=200,  # the environment itself has no time limit
    ),
    "Blackjack-v1": Texts(
        observation=lambda env, s: _BLACKJACK_OBS,
        action=lambda env, s: {"meanings": ["stick (stop drawing)", "hit (draw a card)"]},
        reward="+1 win, -1 loss, 0 draw, given when the hand ends (0 while you keep hitting); "
        "sab = true (default): a natural 21 beats a dealer without one; natural = true "
        "(with sab = false): a natural win pays 1.5",
        termination="terminated when you stick or your sum exceeds 21 (bust)",
        metrics={
            "win": "1.0 if the hand was won, else 0.0",
            "draw": "1.0 if the hand was a draw, else 0.0",
            "loss": "1.0 if the hand was lost, else 0.0",
        },
        outcome=_blackjack_outcome,
        kwargs={"natural": Kwarg((bool,), False), "sab": Kwarg((bool,), True)},
    ),
}
