"""Stable-Retro games as Gymnasium environments, each emulator in a child process.

Importing this registers ``retro/<Game>`` (``retro/Airstriker-Genesis-v0``) for every
game whose ROM ships in the installed wheel. The environment starts
:mod:`evopolicy_mcp.environments.retro.emulator` with pipes for commands and replies
and a memfd into which the child writes each observation (and the screen, for
``render_mode="rgb_array"``), so a frame crosses without a copy through the pipe.
Stable-Retro's own game rules apply: the integration's reward (the score's change),
its end (game over), ``info`` with lives and score. Emulation is deterministic, so the
episode's seed enters through sticky actions (``sticky``, default 0.25: a frame keeps
the previous frame's buttons with that probability, drawn from the seed): the same
seed and buttons give the same episode in any process, another seed another one.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import subprocess
import sys
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from evopolicy_mcp.environments.retro.emulator import read_message, write_message

__all__ = ["BUTTONS", "RetroEnv", "games"]

# Each console's pad, as Stable-Retro orders its buttons (MultiBinary index order).
BUTTONS = {
    "Genesis": ["B", "A", "MODE", "START", "UP", "DOWN", "LEFT", "RIGHT", "C", "Y", "X", "Z"]
}
SCREEN = {"Genesis": (224, 320, 3)}
RAM_BYTES = {"Genesis": 65536}
CLOSE_SECONDS = 5.0


def games() -> list[str]:
    """The games whose ROMs ship in the installed wheel."""
    import stable_retro as retro

    found = []
    for game in retro.data.list_games(retro.data.Integrations.ALL):
        try:
            retro.data.get_romfile_path(game, retro.data.Integrations.ALL)
        except FileNotFoundError:
            continue
        found.append(game)
    return sorted(found)


class RetroError(RuntimeError):
    """The emulator process failed; the message says how."""


class RetroEnv(gymnasium.Env[np.ndarray, np.ndarray]):
    """One game, its emulator in a child process."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 60}

    def __init__(
        self,
        game: str,
        state: str = "Level1",
        obs_type: str = "image",
        render_mode: str | None = None,
        sticky: float = 0.25,
    ) -> None:
        if obs_type not in ("image", "ram"):
            raise ValueError(f"obs_type must be 'image' or 'ram', got {obs_type!r}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        if not 0.0 <= sticky < 1.0:
            raise ValueError(f"sticky must be in [0, 1), got {sticky!r}")
        console = game.rsplit("-", 2)[1]
        if console not in BUTTONS:
            raise ValueError(f"{game}: consoles supported here: {', '.join(BUTTONS)}")
        self.game, self.render_mode, self.buttons = game, render_mode, BUTTONS[console]
        shape = SCREEN[console] if obs_type == "image" else (RAM_BYTES[console],)
        self.observation_space = spaces.Box(0, 255, shape, np.uint8)
        self.action_space = spaces.MultiBinary(len(self.buttons))
        self._size = int(np.prod(shape))
        screen = int(np.prod(SCREEN[console])) if render_mode else 0
        fd = os.memfd_create(f"retro-{game}")
        try:
            os.ftruncate(fd, self._size + screen)
            self._memory = mmap.mmap(fd, self._size + screen)
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "evopolicy_mcp.environments.retro.emulator"]
                + [game, state, str(fd), obs_type, "screen" if render_mode else "-", str(sticky)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                pass_fds=(fd,),
            )
        finally:
            os.close(fd)
        buffer = np.frombuffer(self._memory, dtype=np.uint8)
        self._obs = buffer[: self._size].reshape(shape)
        self._screen = buffer[self._size :].reshape(SCREEN[console]) if screen else None
        self._closed = False

    def _call(self, command: dict[str, Any]) -> dict[str, Any]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            write_message(self._proc.stdin, command)  # type: ignore[arg-type]
            reply = read_message(self._proc.stdout)  # type: ignore[arg-type]
        except (BrokenPipeError, ValueError) as exc:
            reply, why = None, str(exc)
        else:
            why = "it exited"
        if reply is None:
            raise RetroError(
                f"the {self.game} emulator process failed ({why}, code {self._proc.poll()})"
            )
        if "error" in reply:
            raise RetroError(f"the {self.game} emulator: {reply['error']}")
        return reply

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        reply = self._call({"op": "reset", "seed": 0 if seed is None else int(seed)})
        return self._obs.copy(), reply["info"]

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        reply = self._call({"op": "step", "action": np.asarray(action).astype(int).tolist()})
        terminated, truncated = bool(reply["terminated"]), bool(reply["truncated"])
        return self._obs.copy(), float(reply["reward"]), terminated, truncated, reply["info"]

    def render(self) -> np.ndarray | None:  # type: ignore[override]
        if self.render_mode != "rgb_array":
            return None
        return (self._screen if self._screen is not None else self._obs).copy()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        proc = self._proc
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # a dead child: the pipe is broken
                    stream.close()  # the child ends when its commands end
        try:
            proc.wait(CLOSE_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self._obs = self._screen = None  # type: ignore[assignment]
        self._memory.close()


def _register() -> None:
    for game in games():
        if f"retro/{game}" not in gymnasium.registry:
            gymnasium.register(
                f"retro/{game}", entry_point=f"{__name__}:RetroEnv", kwargs={"game": game}
            )


_register()
