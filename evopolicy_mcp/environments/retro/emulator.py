"""The child process that owns one Stable-Retro emulator (``python -m`` this module).

Protocol on the pipes the parent gives it (stdin: commands, the original stdout:
replies; the child's own prints go to stderr): each message is a 4-byte
little-endian length and a JSON body. Commands: ``{"op": "reset", "seed": n}``,
``{"op": "step", "action": [0, 1, ...]}``. Replies: ``{"info": {...}}`` or
``{"reward": r, "terminated": b, "truncated": b, "info": {...}}``, or ``{"error":
"..."}``. Each observation is written into the memfd whose descriptor is the third
argument, before the reply. The child ends when its stdin closes.

Arguments: GAME STATE FRAME_FD OBS_TYPE (``image`` or ``ram``) SCREEN (``screen``: also
write the screen after the observation, for replays; ``-``: not) STICKY (the
probability that a frame keeps the previous frame's buttons instead of the new ones,
drawn from a generator seeded by the reset's seed: sticky actions, as Machado et al.
recommend for the Arcade Learning Environment, so that the episode depends on the
seed and not only on the buttons).
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import sys
from typing import Any, BinaryIO

__all__ = ["read_message", "write_message"]

_LENGTH = struct.Struct("<I")
MAX_MESSAGE = 1 << 20


def read_message(stream: BinaryIO) -> dict[str, Any] | None:
    """One message, or None at the end of the stream."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    if size > MAX_MESSAGE:
        raise ValueError(f"message of {size} bytes is over the limit")
    body = stream.read(size)
    if len(body) < size:
        return None
    message: dict[str, Any] = json.loads(body)
    return message


def write_message(stream: BinaryIO, message: dict[str, Any]) -> None:
    body = json.dumps(message, separators=(",", ":")).encode()
    stream.write(_LENGTH.pack(len(body)) + body)
    stream.flush()


def _plain(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v.item() if hasattr(v, "item") else v for k, v in info.items()}


def main(argv: list[str]) -> int:
    game, state, frame_fd, obs_type, screen = argv[0], argv[1], int(argv[2]), argv[3], argv[4]
    sticky = float(argv[5])
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # the emulator's and Python's prints go to stderr, not the protocol
    sys.stdout = sys.stderr
    commands = sys.stdin.buffer

    import numpy as np
    import stable_retro as retro

    kind = retro.Observations.RAM if obs_type == "ram" else retro.Observations.IMAGE
    env = retro.make(game, state=state, render_mode=None, obs_type=kind)
    frame = mmap.mmap(frame_fd, 0)
    view = np.frombuffer(frame, dtype=np.uint8)

    rng = np.random.default_rng(0)
    previous = np.zeros(env.action_space.shape, dtype=np.int8)

    def show(obs: Any) -> None:
        view[: obs.size] = obs.reshape(-1)
        if screen == "screen":
            image = env.em.get_screen()
            view[obs.size : obs.size + image.size] = image.reshape(-1)

    try:
        while (command := read_message(commands)) is not None:
            try:
                if command["op"] == "reset":
                    obs, info = env.reset(seed=int(command["seed"]))
                    rng = np.random.default_rng(int(command["seed"]))
                    previous[:] = 0
                    show(obs)
                    write_message(replies, {"info": _plain(info)})
                elif command["op"] == "step":
                    action = np.asarray(command["action"], dtype=np.int8)
                    if rng.random() < sticky:
                        action = previous.copy()
                    previous[:] = action
                    obs, reward, terminated, truncated, info = env.step(action)
                    show(obs)
                    write_message(
                        replies,
                        {
                            "reward": float(reward),
                            "terminated": bool(terminated),
                            "truncated": bool(truncated),
                            "info": _plain(info),
                        },
                    )
                else:
                    write_message(replies, {"error": f"unknown op {command['op']!r}"})
            except Exception as exc:  # reported to the parent, which raises it there
                write_message(replies, {"error": f"{type(exc).__name__}: {exc}"[:500]})
    finally:
        env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
