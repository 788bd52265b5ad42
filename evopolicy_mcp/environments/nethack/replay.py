"""Text replays of traced NetHack and MiniHack episodes, re-played from seed and actions.

Two plain-text files, both bounded:

``replay.txt``
    the 24x80 terminal as the player saw it, at evenly spaced steps (at most
    :data:`FRAMES`) and at every one of the last :data:`LAST_FRAMES` steps, each
    under a header line with the step, the action and the reward;
``trajectory.tsv``
    one line per step: step, action, reward, hit points, depth, experience level,
    score, game turn and the top-line message.

NetHack is deterministic given its seeds (the family's seed hook sets them before
the reset), so the re-played episode is the live one; a note says so if it ended
elsewhere. Nothing here imports NLE: the environment comes from ``make``.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from evopolicy_mcp.adapters.replay import ReplayUnavailable
from evopolicy_mcp.environments.nethack.names import action_label
from evopolicy_mcp.environments.nethack.report import DEPTH, HP, SCORE, TIME, XL

__all__ = ["FRAMES", "LAST_FRAMES", "text_replay"]

FRAMES = 120  # so replay.txt stays under about 400 kB: a frame is at most 24 x 81 bytes
LAST_FRAMES = 60
TRAJECTORY_BYTES = 1_000_000
KEYS = ("tty_chars", "blstats", "message")


def _screen(tty: np.ndarray) -> str:
    rows = (bytes(row).decode("latin-1").rstrip() for row in tty)
    return "\n".join(rows).rstrip("\n")


def _message(obs: Any) -> str:
    return bytes(obs["message"]).rstrip(b"\0").decode("latin-1").replace("\t", " ")


def text_replay(
    make: Callable[..., Any], seed: int, actions: Sequence[Any], last: Any
) -> tuple[dict[str, bytes], str | None]:
    """Re-play ``actions`` in ``make(observation_keys=...)`` reset with ``seed``."""
    steps = len(actions)
    stride = max(1, math.ceil(steps / FRAMES))
    wanted = set(range(0, steps + 1, stride)) | set(range(max(0, steps - LAST_FRAMES), steps + 1))
    try:
        env = make(observation_keys=KEYS)
    except Exception as exc:
        raise ReplayUnavailable(f"no replay: cannot make the environment ({exc})") from None
    frames, lines = io.StringIO(), io.StringIO()
    try:
        names = [action_label(type(a).__name__, a.name) for a in env.unwrapped.actions]
        obs, _ = env.reset(seed=seed)
        frames.write(f"NetHack text replay: {steps} steps, 24x80 terminal frames\n")
        frames.write(f"=== step 0 (start) ===\n{_screen(obs['tty_chars'])}\n")
        lines.write("step\taction\treward\thp\tdepth\tlevel\tscore\tturn\tmessage\n")
        full = False
        for t, action in enumerate(actions, start=1):
            obs, reward, *_ = env.step(action)
            b = obs["blstats"]
            if not full:
                lines.write(
                    f"{t}\t{names[action]}\t{reward:g}\t{b[HP]}\t{b[DEPTH]}\t{b[XL]}\t"
                    f"{b[SCORE]}\t{b[TIME]}\t{_message(obs)}\n"
                )
                full = lines.tell() > TRAJECTORY_BYTES
            if t in wanted:
                frames.write(
                    f"=== step {t}: {names[action]}, reward {reward:g} ===\n"
                    f"{_screen(obs['tty_chars'])}\n"
                )
        final = obs["blstats"]
    finally:
        env.close()
    if full:
        lines.write("... (cut here: the file is at its size limit)\n")
    replay = frames.getvalue().encode("latin-1")
    note = None
    if last is not None and not np.array_equal(final, last["blstats"]):
        note = "the re-played episode ended elsewhere than the live one; the replay may differ"
    return {"replay.txt": replay, "trajectory.tsv": lines.getvalue().encode("latin-1")}, note
