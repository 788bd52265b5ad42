"""The ``atari`` adapter: Atari 2600 games of the Arcade Learning Environment (ALE v5 ids).

Every game whose ROM ships inside the ``ale-py`` wheel. The action meanings are
the game's own minimal action set, read from the emulator; observations are
the screen (``obs_type = "rgb"``, the default) or the console's 128 bytes of
RAM (``obs_type = "ram"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evopolicy_mcp.adapters.gym import GymAdapter, Tally, Texts

__all__ = ["ATARI", "make_adapter"]

MOVES = {
    "NOOP": "do nothing",
    "FIRE": "press the button",
    "UP": "joystick up",
    "RIGHT": "joystick right",
    "LEFT": "joystick left",
    "DOWN": "joystick down",
}


def _meaning(name: str) -> str:
    if name in MOVES:
        return f"{name}: {MOVES[name]}"
    fire = name.endswith("FIRE") and name != "FIRE"
    stick = name.removesuffix("FIRE").lower().replace("up", "up ").replace("down", "down ")
    text = f"joystick {' '.join(stick.split())}" + (" and press the button" if fire else "")
    return f"{name}: {text}"


def _observation(env: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    kind = s.get("obs_type", "rgb")
    if kind == "ram":
        return {
            "description": "the console's 128 bytes of RAM (uint8) after the last frame: the "
            "game's whole state, in the game's own layout (positions, counters, score digits "
            "often in BCD)"
        }
    if kind == "grayscale":
        return {"description": "the screen in grey levels [row][col] (uint8), 160 pixels wide"}
    return {
        "description": "the screen as an RGB image [row][col][channel] (uint8), 160 pixels "
        "wide, as the console draws it (some objects flicker: they are drawn every other frame)"
    }


def _action(env: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    names = list(env.get_action_meanings())
    found: dict[str, Any] = {
        "description": "the game's minimal action set; each action is held for the frameskip",
        "meanings": [_meaning(n) for n in names],
    }
    if "NOOP" in names:
        found["noop"] = names.index("NOOP")
    return found


def _outcome(t: Tally) -> dict[str, float]:
    return {
        "score": t.total_reward,
        "lives_left": float(t.info.get("lives", 0)),
        "game_over": float(t.terminated),
    }


ATARI = Texts(
    observation=_observation,
    action=_action,
    reward="the change in the game's score on this step (summed over the skipped frames)",
    termination="terminated when the game is over (the last life is lost, or the game's "
    "own end); truncated at the task's step limit",
    metrics={
        "score": "the game score of the episode (its return)",
        "lives_left": "lives remaining at the end (0 for games without lives)",
        "game_over": "1.0 if the game ended by itself before the step limit, else 0.0",
    },
    outcome=_outcome,
    extra=lambda env, s: {
        "game": env._game if hasattr(env, "_game") else None,
        "frameskip": s.get("frameskip", 4),
        "repeat_action_probability": s.get("repeat_action_probability", 0.25),
        "frames_per_second": 60,
    },
)


def make_adapter() -> GymAdapter:
    return GymAdapter(
        "atari",
        default=ATARI,
        package="ale_py",
        extra="atari",
        example_parameters={"env_id": "ALE/Pong-v5", "max_episode_steps": 2000},
    )
