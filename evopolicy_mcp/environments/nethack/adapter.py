"""The ``nethack`` and ``minihack`` adapters: NLE's tasks and MiniHack's on the kit.

Both are NetHack underneath, so they share everything here: the meaning of each
observation entry and action key (:mod:`.names`), the seeding that makes an episode
a function of its seed (NLE's ``reset(seed=)`` seeds only Gymnasium's generator, not
NetHack's: :func:`seed_nethack` sets NetHack's core and display generators before
every reset, without NetHack's own reseeding), the per-episode report
(:mod:`.report`) and the text replay (:mod:`.replay`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evopolicy_mcp.adapters.gym import GymAdapter, Texts
from evopolicy_mcp.environments.nethack.names import (
    BLSTATS,
    OBSERVATIONS,
    action_label,
    action_meaning,
)
from evopolicy_mcp.environments.nethack.replay import text_replay
from evopolicy_mcp.environments.nethack.report import METRICS, Tally

__all__ = ["MINIHACK_IDS", "NETHACK_IDS", "make_adapter", "make_minihack_adapter", "seed_nethack"]

NETHACK_IDS = (
    "NetHackScore-v0",
    "NetHackStaircase-v0",
    "NetHackStaircasePet-v0",
    "NetHackOracle-v0",
    "NetHackGold-v0",
    "NetHackEat-v0",
    "NetHackScout-v0",
)
MINIHACK_IDS = (
    "MiniHack-Room-5x5-v0",
    "MiniHack-Room-15x15-v0",
    "MiniHack-Room-Random-15x15-v0",
    "MiniHack-Room-Dark-15x15-v0",
    "MiniHack-Room-Monster-15x15-v0",
    "MiniHack-Room-Trap-15x15-v0",
    "MiniHack-Room-Ultimate-15x15-v0",
    "MiniHack-Corridor-R2-v0",
    "MiniHack-Corridor-R3-v0",
    "MiniHack-Corridor-R5-v0",
    "MiniHack-MazeWalk-9x9-v0",
    "MiniHack-MazeWalk-15x15-v0",
    "MiniHack-MazeWalk-45x19-v0",
    "MiniHack-KeyRoom-S5-v0",
    "MiniHack-KeyRoom-S15-v0",
    "MiniHack-MultiRoom-N2-v0",
    "MiniHack-MultiRoom-N4-v0",
    "MiniHack-MultiRoom-N6-v0",
    "MiniHack-River-v0",
    "MiniHack-LavaCross-Full-v0",
    "MiniHack-LavaCross-Levitate-Potion-Inv-Full-v0",
    "MiniHack-Eat-v0",
    "MiniHack-Wear-v0",
    "MiniHack-Wield-v0",
    "MiniHack-Memento-F2-v0",
    "MiniHack-Quest-Easy-v0",
)
_MASK = (1 << 64) - 1


def seed_nethack(env: Any, seed: int) -> None:
    """Seed NetHack's generators from the episode's seed, without its own reseeding, and
    clear the logs of earlier games.

    MiniHack's MiniGrid-made maps (MultiRoom) are drawn by a MiniGrid environment
    first, seeded here too (MiniHack's own seed() calls a method MiniGrid no longer has).
    """
    from nle.env.base import NLE

    core = seed & _MASK
    display = (seed * 6364136223846793005 + 1442695040888963407) & _MASK
    inner = getattr(env, "minigrid_env", None)
    if inner is not None:
        inner.reset(seed=seed & 0xFFFFFFFF)
    NLE.seed(env, core, display, reseed=False)
    _forget_other_games(env)


def _forget_other_games(env: Any) -> None:
    """Empty the game logs of a reused environment: NetHack shows its top-ten list (the
    record file) when a game ends, which must not show another episode's game."""
    vardir = Path(getattr(env.nethack, "_vardir", "") or "")
    for name in ("record", "logfile", "xlogfile"):
        log = vardir / name
        if vardir.parts and log.is_file():
            log.write_bytes(b"")


def _labels(env: Any) -> list[str]:
    return [action_label(type(a).__name__, a.name) for a in env.actions]


def _observation(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    parts: dict[str, dict[str, Any]] = {
        key: {"description": OBSERVATIONS.get(key, "")} for key in env.observation_space.spaces
    }
    if "blstats" in parts:
        parts["blstats"].update(
            names=[name for name, _ in BLSTATS], descriptions=[text for _, text in BLSTATS]
        )
    return {
        "description": "What the player sees, as numpy arrays: the 21x79 map (row 0 is the "
        "terminal's second line), the top-line message, the bottom-line statistics and "
        "(where present) the inventory. Text arrays hold bytes: decode with "
        "bytes(a).rstrip(b'\\x00').decode('latin-1').",
        "parts": parts,
    }


def _action(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "description": "An index into the task's action set; each is one key press. "
        "Prompts (which item? which direction?) are answered by the following actions.",
        "meanings": [action_meaning(type(a).__name__, a.name, int(a)) for a in env.actions],
    }


def _extra(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "action_keys": _labels(env),
        "character": getattr(env, "character", None),
        "step_limit": env._max_episode_steps,
    }


def _watch(env: Any, settings: Mapping[str, Any]) -> Tally:
    return Tally(env, _labels(env), env._max_episode_steps)


def _texts(reward: str) -> Texts:
    return Texts(
        observation=_observation,
        action=_action,
        reward=reward,
        termination="when the hero dies or the task's goal is reached; truncated at the "
        "step limit (NLE aborts the episode there)",
        metrics=METRICS,
        horizon=lambda env: env._max_episode_steps,
        extra=_extra,
        seed=seed_nethack,
        watch=_watch,
        record=text_replay,
        reuse=True,
    )


NETHACK = _texts("NLE's task reward (see the task description)")
MINIHACK = _texts("MiniHack's: 1 on reaching the goal, 0 otherwise, minus small step penalties")


def make_adapter() -> GymAdapter:
    return GymAdapter(
        "nethack",
        dict.fromkeys(NETHACK_IDS, NETHACK),
        default=None,
        package="nle",
        extra="nethack",
        example_parameters={"env_id": "NetHackScore-v0", "kwargs": {"fix_moon_phase": True}},
    )


def make_minihack_adapter() -> GymAdapter:
    return GymAdapter(
        "minihack",
        dict.fromkeys(MINIHACK_IDS, MINIHACK),
        default=None,
        package="minihack",
        extra="nethack",
        example_parameters={"env_id": "MiniHack-Room-5x5-v0", "kwargs": {"fix_moon_phase": True}},
    )
