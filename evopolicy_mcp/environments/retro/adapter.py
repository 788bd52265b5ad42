"""The ``retro`` adapter: Stable-Retro games whose ROMs ship in the wheel, on the kit.

The Genesis pad's buttons, the game's reward and end come from Stable-Retro's
integration files (Poliquin et al., "Gym Retro", OpenAI 2018; Stable-Retro 1.0).
Emulators run in child processes (:mod:`.env`); an emulator resets in a
millisecond, so they are reused between episodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evopolicy_mcp.adapters.gym import GymAdapter, Tally, Texts

__all__ = ["GAMES", "make_adapter"]

GAMES = ("Airstriker-Genesis-v0",)  # env.games() on the pinned wheel (a test checks it)


def _observation(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    if len(env.observation_space.shape) == 1:
        return {
            "description": f"the console's {env.observation_space.shape[0]} bytes of work "
            "RAM after the frame (uint8)"
        }
    height, width, _ = env.observation_space.shape
    return {"description": f"the screen, {height}x{width} RGB pixels (rows top to bottom, uint8)"}


def _action(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    pad = ", ".join(f"[{i}] {b}" for i, b in enumerate(env.buttons))
    return {"description": f"a 0/1 per pad button, held for this frame: {pad}"}


def _outcome(t: Tally) -> dict[str, float]:
    return {"score": float(t.info.get("score", 0)), "lives": float(t.info.get("lives", 0))}


RETRO = Texts(
    observation=_observation,
    action=_action,
    reward="the change of the game's score (Stable-Retro's integration)",
    termination="game over (no lives left); truncated at the step limit",
    metrics={
        "score": "the game's score at the last step",
        "lives": "lives left at the last step",
    },
    outcome=_outcome,
    kwargs=None,
    reuse=True,
)


def make_adapter() -> GymAdapter:
    return GymAdapter(
        "retro",
        {f"retro/{game}": RETRO for game in GAMES},
        default=None,
        package="evopolicy_mcp.environments.retro.env",
        extra="retro",
        example_parameters={"env_id": "retro/Airstriker-Genesis-v0", "max_episode_steps": 3000},
    )
