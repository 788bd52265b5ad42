"""The ``robotics`` adapter: Gymnasium-Robotics (Fetch, mazes, Adroit, Shadow hand, kitchen).

Gymnasium-Robotics documents every observation and action component in a table in
each environment class's docstring (``| Num | Observation | Min | Max | ... | Unit |``);
the texts here read those tables from the installed classes, so the words match the
installed version, and add what a table does not say: the goal keys, the success
condition and the metrics. A table whose length does not match the space (a doc out
of step with its class) is left out rather than misnumbered.

Metrics: ``success`` (the goal holds at the last step: the Fetch and hand tasks'
success rate, Plappert et al. 2018, arXiv:1802.09464), ``reached`` (it held at some
step), ``success_steps`` (at how many), and for the kitchen ``tasks_completed``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from evopolicy_mcp.adapters.gym import GymAdapter, Tally, Texts

__all__ = ["doc_tables", "make_adapter"]

_HEADING = re.compile(r"^\s*#+\s*(.*?)\s*$")
_BULLET = re.compile(r"^\s*\*\s+`(\w+)`")
_ROW = re.compile(r"^\s*\|(.*)\|\s*$")


def doc_tables(cls: type) -> dict[str, list[str]]:
    """The component tables of a Gymnasium-Robotics class's docstring: ``action`` and
    one per observation key (``observation`` for a flat observation), each a list of
    "description (unit)" by index."""
    owner = next((c for c in cls.__mro__ if c.__doc__ and "| Num" in c.__doc__), None)
    if owner is None or owner.__doc__ is None:
        return {}
    tables: dict[str, list[str]] = {}
    section, key, columns = "", "observation", [""]
    for line in owner.__doc__.splitlines():
        heading = _HEADING.match(line)
        if heading and not line.lstrip().startswith("|"):
            section = heading.group(1).lower()
            key = "observation"
            continue
        bullet = _BULLET.match(line)
        if bullet:
            key = bullet.group(1)
            continue
        row = _ROW.match(line)
        if row is None:
            continue
        cells = [c.strip() for c in row.group(1).split("|")]
        if cells[0].lower() == "num":
            columns = [c.lower() for c in cells]
            continue
        if not cells[0].isdigit():
            continue  # the |---| line under a header
        name = "action" if "action" in section else key if "observation" in section else None
        if name is None:
            continue
        text = re.sub(r"</?sub>", "", cells[1])
        unit = next((cells[i] for i, c in enumerate(columns) if "unit" in c and i < len(cells)), "")
        short = re.search(r"\(([^()]+)\)\s*$", unit)  # "angle (rad)" -> "rad"
        unit = short.group(1) if short else unit
        entry = f"{text} ({unit})" if unit and unit not in ("-", "") else text
        table = tables.setdefault(name, [])
        if int(cells[0]) == len(table):
            table.append(entry)
    return tables


COMPONENTS = 40  # longer tables go into one text: per-component entries would fill a page


def _component_words(table: list[str] | None, space: Any, what: str) -> dict[str, Any]:
    shape = getattr(space, "shape", None)
    if not table or shape is None or len(shape) != 1 or len(table) != shape[0]:
        return {"description": what}
    if len(table) <= COMPONENTS:
        return {"description": what, "descriptions": table}
    listed = "; ".join(f"[{i}] {text}" for i, text in enumerate(table))
    return {"description": f"{what}, by index: {listed}"}


GOALS = {
    "desired_goal": "the goal this episode asks for (the target the achieved_goal must reach)",
    "achieved_goal": "the same quantity as it is now; the goal holds when the two are "
    "close enough (see the task description)",
}


def _observation(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    tables = doc_tables(type(env))
    space = env.observation_space
    if not hasattr(space, "spaces"):
        return _component_words(tables.get("observation"), space, "The robot's state")
    parts: dict[str, Any] = {}
    for key, sub in space.spaces.items():
        what = GOALS.get(key, "the robot's state")
        if not hasattr(sub, "spaces"):
            parts[key] = _component_words(tables.get(key), sub, what)
            continue
        parts[key] = {  # the kitchen's goals: one array per sub-task
            "description": what,
            "parts": {
                task: {
                    "description": f"{key.replace('_', ' ')} of the '{task}' sub-task "
                    "(joint positions of that object)"
                }
                for task in sub.spaces
            },
        }
    return {"description": "A goal-aware dict of float64 arrays.", "parts": parts}


def _action(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    table = doc_tables(type(env)).get("action")
    return _component_words(table, env.action_space, "Continuous controls, each within its bounds")


FETCH_ACTIONS = [
    "move the gripper's target along x by up to 5 cm per step (1 = +5 cm)",
    "move the gripper's target along y by up to 5 cm per step",
    "move the gripper's target along z by up to 5 cm per step",
    "gripper fingers: positive opens, negative closes",
]


def _fetch_action(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "description": "Cartesian displacement of the end effector and the gripper command.",
        "names": ["dx", "dy", "dz", "gripper"],
        "descriptions": FETCH_ACTIONS,
    }


def _succeeded(info: Mapping[str, Any]) -> bool:
    return bool(info.get("is_success", info.get("success", False)))


def _outcome(t: Tally) -> dict[str, float]:
    steps = t.counts.get("success", 0)
    return {
        "success": float(_succeeded(t.info)),
        "reached": float(steps > 0),
        "success_steps": float(steps),
    }


def _kitchen_outcome(t: Tally) -> dict[str, float]:
    done = len(t.info.get("episode_task_completions", ()))
    left = len(t.info.get("tasks_to_complete", ())) if t.steps else None
    return {"tasks_completed": float(done), "success": float(left == 0)}


METRICS = {
    "success": "1.0 if the goal holds at the last step (the robot's task is done), else 0.0",
    "reached": "1.0 if the goal held at any step of the episode, else 0.0",
    "success_steps": "the number of steps at which the goal held",
}
KITCHEN_METRICS = {
    "tasks_completed": "the number of the episode's sub-tasks completed",
    "success": "1.0 if every sub-task of the episode was completed, else 0.0",
}

ROBOTICS = Texts(
    observation=_observation,
    action=_action,
    reward="as Gymnasium-Robotics defines it for the id (see the task description)",
    metrics=METRICS,
    counters={"success": lambda obs, reward, info: _succeeded(info)},
    outcome=_outcome,
    replay_kwargs={"width": 160, "height": 160},
    replay_frames=60,  # software GL draws a few dozen frames a second
    reuse=True,
)

FETCH = dataclasses.replace(ROBOTICS, action=_fetch_action)
KITCHEN = dataclasses.replace(
    ROBOTICS,
    metrics=KITCHEN_METRICS,
    counters={},
    outcome=_kitchen_outcome,
    replay_frames=6,  # software GL takes about 1.5 s for one frame of the kitchen
)
FETCH_IDS = tuple(f"Fetch{t}-v4" for t in ("Reach", "Push", "Slide", "PickAndPlace"))
IDS = (
    *(f"PointMaze_{m}-v3" for m in ("UMaze", "Open", "Medium", "Large")),
    *(f"AntMaze_{m}-v5" for m in ("UMaze", "Open", "Medium", "Large")),
    *(f"AdroitHand{t}-v1" for t in ("Door", "Hammer", "Pen", "Relocate")),
    "HandReach-v3",
    *(
        f"HandManipulate{o}{v}-v1"
        for o, variants in (
            ("Block", ("RotateZ", "RotateParallel", "RotateXYZ", "")),
            ("Egg", ("Rotate", "")),
            ("Pen", ("Rotate", "")),
        )
        for v in variants
    ),
)


def make_adapter() -> GymAdapter:
    # The registering module is gymnasium_robotics; importing it registers every id.
    return GymAdapter(
        "robotics",
        {
            **dict.fromkeys(FETCH_IDS, FETCH),
            **dict.fromkeys(IDS, ROBOTICS),
            "FrankaKitchen-v1": KITCHEN,
        },
        default=None,
        package="gymnasium_robotics",
        extra="robotics",
        example_parameters={"env_id": "FetchReach-v4"},
    )
