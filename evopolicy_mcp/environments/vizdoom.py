"""The ``vizdoom`` adapter: ViZDoom's scenarios (Doom from pixels) on the kit.

ViZDoom's own Gymnasium wrapper registers the scenarios whose configs and WADs ship
in the wheel (``VizdoomBasic-v1``, ...); these texts name the buttons each action
index presses and the game variables the observation carries, read from the live
game (Kempka et al., "ViZDoom: A Doom-based AI Research Platform for Visual
Reinforcement Learning", 2016, arXiv:1605.02097). A Doom engine takes 0.2-1 s to
start and ``reset(seed=)`` re-seeds it for a new episode, so engines are reused.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from evopolicy_mcp.adapters.gym import GymAdapter, Texts

__all__ = ["BUTTONS", "SCENARIOS", "VARIABLES", "make_adapter"]

SCENARIOS = (
    "Basic",
    "DeadlyCorridor",
    "Deathmatch",
    "DefendCenter",
    "DefendLine",
    "HealthGathering",
    "HealthGatheringSupreme",
    "MyWayHome",
    "PredictPosition",
    "TakeCover",
)

BUTTONS = {
    "ATTACK": "fire the weapon",
    "USE": "use (open doors, press switches)",
    "SPEED": "run (held with a move)",
    "STRAFE": "strafe (turning buttons then move sideways)",
    "MOVE_RIGHT": "step right",
    "MOVE_LEFT": "step left",
    "MOVE_BACKWARD": "move backward",
    "MOVE_FORWARD": "move forward",
    "TURN_RIGHT": "turn right",
    "TURN_LEFT": "turn left",
    "SELECT_NEXT_WEAPON": "switch to the next weapon",
    "SELECT_PREV_WEAPON": "switch to the previous weapon",
    "LOOK_UP_DOWN_DELTA": "look up (+) or down (-) by this many degrees",
    "TURN_LEFT_RIGHT_DELTA": "turn right (+) or left (-) by this many degrees",
    "MOVE_LEFT_RIGHT_DELTA": "step right (+) or left (-) at this speed",
}
VARIABLES = {
    "AMMO2": "bullets for the pistol (ammo of type 2)",
    "HEALTH": "health, 0..100 (0 is death)",
    "ARMOR": "armour points",
    "KILLCOUNT": "monsters killed in this episode",
    "SELECTED_WEAPON": "the selected weapon's slot number",
    "SELECTED_WEAPON_AMMO": "ammunition of the selected weapon",
}


def _button(name: str) -> str:
    if name.startswith("SELECT_WEAPON"):
        return f"select weapon slot {name.removeprefix('SELECT_WEAPON')}"
    return BUTTONS.get(name, name.lower().replace("_", " "))


def _buttons(env: Any) -> tuple[list[str], list[str]]:
    """The delta buttons and the binary buttons, in the order the wrapper uses."""
    names = [b.name for b in env.game.get_available_buttons()]
    deltas = names[: env.num_delta_buttons]
    return deltas, names[env.num_delta_buttons :]


def _press_meanings(env: Any, binary: list[str]) -> list[str]:
    meanings = []
    for pressed in env.button_map:
        held = [_button(binary[i]) for i, on in enumerate(pressed) if on]
        meanings.append(" + ".join(held) if held else "do nothing")
    return meanings


def _observation(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    variables = [v.name for v in env.game.get_available_game_variables()]
    height, width = env.game.get_screen_height(), env.game.get_screen_width()
    parts: dict[str, Any] = {
        "screen": {
            "description": f"the player's view, {height}x{width} RGB pixels (rows top to "
            "bottom, uint8)"
        },
    }
    if "gamevariables" in env.observation_space.spaces:
        parts["gamevariables"] = {
            "description": "the scenario's game variables",
            "names": [v.lower() for v in variables],
            "descriptions": [VARIABLES.get(v, v.lower().replace("_", " ")) for v in variables],
        }
    return {"description": "A dict: the screen and the game variables.", "parts": parts}


def _action(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    deltas, binary = _buttons(env)
    binary_words: dict[str, Any] = {
        "description": "which buttons to hold for this step",
        **({"meanings": _press_meanings(env, binary)} if hasattr(env, "button_map") else {}),
    }
    if not deltas:
        return binary_words
    return {
        "description": "binary: which buttons to hold; continuous: the delta buttons' values",
        "parts": {
            "binary": binary_words,
            "continuous": {
                "description": "values of the delta buttons",
                "names": [d.lower() for d in deltas],
                "descriptions": [_button(d) for d in deltas],
            },
        },
    }


def _extra(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    deltas, binary = _buttons(env)
    return {
        "buttons": binary,
        "delta_buttons": deltas,
        "frame_skip": env.frame_skip,
        "episode_timeout_tics": env.game.get_episode_timeout(),
    }


class Watch:
    """How a Doom episode ended, the kills, and how often each action was chosen."""

    def __init__(self, env: Any) -> None:
        self._game = env.game
        binary = _buttons(env)[1]
        self._labels = _press_meanings(env, binary) if hasattr(env, "button_map") else None
        self._actions: dict[str, int] = {}
        self.steps = 0

    def start(self, observation: Any) -> None:
        pass

    def step(self, action: Any, observation: Any, reward: float, info: Mapping[str, Any]) -> None:
        self.steps += 1
        if self._labels is not None:
            choice = action["binary"] if isinstance(action, Mapping) else action
            label = self._labels[int(choice)]
            self._actions[label] = self._actions.get(label, 0) + 1

    def _kills(self) -> float:
        from vizdoom import GameVariable

        return float(self._game.get_game_variable(GameVariable.KILLCOUNT))

    def metrics(self) -> dict[str, float]:
        return {"died": float(self._game.is_player_dead()), "kills": self._kills()}

    def report(self) -> dict[str, Any]:
        game = self._game
        if game.is_player_dead():
            end = "died"
        elif game.is_episode_timeout_reached():
            end = "timeout"
        else:
            end = "finished" if game.is_episode_finished() else "stopped"
        return {
            "end": end,
            "kills": int(self._kills()),
            "steps": self.steps,
            "actions": self._actions,
        }


def _no_ini(env: Any, seed: int) -> None:
    """The engine writes its settings to ``./_vizdoom.ini`` at start unless told where:
    nowhere, so running a Doom task leaves no file in the host's working directory
    (the engine still makes an empty ``./_vizdoom/`` folder; it names it in its code)."""
    if not env.game.is_running():
        env.game.set_doom_config_path(os.devnull)


VIZDOOM = Texts(
    observation=_observation,
    action=_action,
    reward="the scenario's reward (see the task description), summed over the skipped frames",
    termination="the scenario's end (a kill, a goal, death) or its timeout (then truncated too)",
    metrics={
        "died": "1.0 if the player died, else 0.0",
        "kills": "monsters killed in the episode",
    },
    seed=_no_ini,
    watch=lambda env, settings: Watch(env),
    horizon=lambda env: -(-env.game.get_episode_timeout() // env.frame_skip) or None,
    extra=_extra,
    reuse=True,
)


def make_adapter() -> GymAdapter:
    return GymAdapter(
        "vizdoom",
        {f"Vizdoom{name}-v1": VIZDOOM for name in SCENARIOS},
        default=None,
        package="vizdoom.gymnasium_wrapper",
        extra="vizdoom",
        example_parameters={"env_id": "VizdoomBasic-v1", "kwargs": {"frame_skip": 4}},
    )
