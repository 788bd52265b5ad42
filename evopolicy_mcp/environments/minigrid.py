"""The ``minigrid`` adapter: MiniGrid and BabyAI gridworlds, with their texts.

One set of texts serves every id: the object, colour and state codes of the
image are read from MiniGrid's own tables, the actions from the environment's
``actions`` enum, the step limit from its ``max_steps``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evopolicy_mcp.adapters.gym import GymAdapter, Tally, Texts

__all__ = ["MINIGRID", "make_adapter"]

ACTION_TEXTS = {
    "left": "turn left (counter-clockwise) in place",
    "right": "turn right (clockwise) in place",
    "forward": "move one cell forward if it is free (open door, floor, goal, lava)",
    "pickup": "pick up the object in front (you can carry one)",
    "drop": "drop the carried object in front, if that cell is empty",
    "toggle": "open/close the door in front (a locked door needs the key of its colour, "
    "carried) or open the box in front",
    "done": "do nothing (most missions end by themselves)",
}


def _codes() -> str:
    from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX, STATE_TO_IDX

    def listed(table: Mapping[str, int]) -> str:
        return ", ".join(f"{i} {name}" for name, i in sorted(table.items(), key=lambda x: x[1]))

    return (
        f"channel 0 object: {listed(OBJECT_TO_IDX)}; channel 1 colour: {listed(COLOR_TO_IDX)}; "
        f"channel 2 state (doors): {listed(STATE_TO_IDX)}"
    )


def _observation(env: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    view = env.agent_view_size
    return {
        "description": "What the agent sees and its mission (a dict).",
        "parts": {
            "image": {
                "description": f"the {view}x{view} cells in front of the agent, indexed "
                f"image[x][y][channel] (uint8): the agent is at x = {view // 2}, "
                f"y = {view - 1}, facing toward y = 0; walls block the view (unseen cells "
                f"are 0). {_codes()}"
            },
            "direction": {
                "description": "the agent's heading in the grid",
                "meanings": ["east (+x)", "south (+y)", "west (-x)", "north (-y)"],
            },
            "mission": {"description": "the task in words, e.g. 'get to the green goal square'"},
        },
    }


def _action(env: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    names = [a.name for a in env.actions][: int(env.action_space.n)]
    found: dict[str, Any] = {"meanings": [f"{n}: {ACTION_TEXTS.get(n, n)}" for n in names]}
    if "done" in names:
        found["noop"] = names.index("done")
    return found


def _success(t: Tally) -> dict[str, float]:
    return {"success": float(t.terminated and t.last_reward > 0)}


MINIGRID = Texts(
    observation=_observation,
    action=_action,
    reward="1 - 0.9 x (steps taken / step limit) on completing the mission, else 0 "
    "(touching lava or failing the mission ends the episode with 0)",
    termination="terminated when the mission is completed or failed (lava, a wrong "
    "object); truncated at the environment's step limit",
    metrics={"success": "1.0 if the mission was completed (positive reward), else 0.0"},
    outcome=_success,
    horizon=lambda env: env.max_steps or None,
    extra=lambda env, s: {"grid": f"{env.width}x{env.height} cells including the outer walls"},
)


def make_adapter() -> GymAdapter:
    return GymAdapter(
        "minigrid",
        default=MINIGRID,
        package="minigrid",
        extra="minigrid",
        example_parameters={"env_id": "MiniGrid-DoorKey-5x5-v0"},
    )
