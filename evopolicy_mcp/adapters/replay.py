"""Replays: an episode re-played on the host from its seed and actions, drawn as a GIF.

Only traced training episodes get one (the evaluation asks only them for
artifacts), so untraced, validation and assessment episodes pay nothing. The
replay is bounded: at most :data:`GIF_FRAMES` evenly spaced frames plus the
last steps, frames no wider or taller than :data:`MAX_SIDE` pixels, the file at
most :data:`GIF_BYTES` (frames are dropped until it fits). Where the machine
cannot render (no display and no offscreen GL), :class:`ReplayUnavailable`
says so, and the caller reports it instead of failing.
"""

from __future__ import annotations

import io
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evopolicy_mcp.adapters.spaces import same_value

__all__ = [
    "GIF_BYTES",
    "GIF_FRAMES",
    "MAX_SIDE",
    "Replay",
    "ReplayUnavailable",
    "gif",
    "replay_gif",
]

GIF_FRAMES = 80  # evenly spaced frames, plus every frame of the last LAST_FRAMES steps
LAST_FRAMES = 20
MAX_SIDE = 256
GIF_BYTES = 2_000_000
# One replay at a time in a process: renderers keep process-wide state (pygame's
# display module, which close() shuts down for everyone; GL contexts), and two
# evaluations' threads drawing at once crashed the interpreter.
_RENDERING = threading.Lock()


class ReplayUnavailable(Exception):
    """This machine cannot draw the replay; the message says why, in one line."""


@dataclass(frozen=True)
class Replay:
    gif: bytes
    frames: int
    note: str | None  # something the reader of the replay should know


def gif(frames: list[np.ndarray], milliseconds: int, max_bytes: int | None = None) -> bytes:
    """An animated GIF of RGB ``frames``; every second frame is dropped until it fits in
    ``max_bytes`` (default :data:`GIF_BYTES`)."""
    from PIL import Image  # pillow is a dependency of the package (through crafter)

    limit = GIF_BYTES if max_bytes is None else max_bytes
    while True:
        # One palette for all frames: quantizing each frame on its own costs 4x the time.
        sample = np.concatenate(frames[:: max(1, len(frames) // 16)], axis=0)
        palette = Image.fromarray(sample).quantize(256, method=Image.Quantize.MEDIANCUT)
        images = [
            Image.fromarray(f).quantize(palette=palette, dither=Image.Dither.NONE) for f in frames
        ]
        out = io.BytesIO()
        images[0].save(
            out,
            format="GIF",
            save_all=True,
            append_images=images[1:],
            duration=milliseconds,
            loop=0,
        )
        if out.tell() <= limit or len(frames) <= 2:
            return out.getvalue()
        frames = frames[::2]
        milliseconds *= 2


def _fit(frame: Any) -> np.ndarray:
    """An RGB uint8 frame no larger than MAX_SIDE on either side (every n-th pixel)."""
    arr = np.asarray(frame)
    if arr.ndim == 2:
        arr = np.repeat(arr[:, :, None], 3, axis=2)
    if arr.ndim != 3 or arr.shape[2] not in (3, 4):
        raise ReplayUnavailable(f"no replay: render() gave an array of shape {arr.shape}")
    height, width = arr.shape[:2]
    step = math.ceil(max(height, width) / MAX_SIDE)  # every step-th pixel: no resampling cost
    return np.ascontiguousarray(arr[::step, ::step, :3], dtype=np.uint8)


def replay_gif(
    make_env: Callable[[], Any],
    seed: int,
    actions: Sequence[Any],
    last: Any,
    frames: int = GIF_FRAMES,
) -> Replay:
    """Re-play ``actions`` on a fresh ``make_env()`` (a Gymnasium environment made with
    ``render_mode="rgb_array"``) reset with ``seed``, and draw ``frames`` evenly spaced
    frames (fewer for environments that render slowly) plus the last steps. ``last`` is
    the live episode's final observation: a replay that ends elsewhere carries a note."""
    with _RENDERING:
        return _replay(make_env, seed, actions, last, max(2, min(frames, GIF_FRAMES)))


def _replay(
    make_env: Callable[[], Any], seed: int, actions: Sequence[Any], last: Any, count: int
) -> Replay:
    steps = len(actions)
    stride = max(1, math.ceil(steps / count))
    tail = max(1, LAST_FRAMES * count // GIF_FRAMES)
    wanted = set(range(0, steps + 1, stride)) | set(range(max(0, steps - tail), steps + 1))
    try:
        env = make_env()
    except Exception as exc:
        raise ReplayUnavailable(
            f"no replay: cannot make the environment to render ({exc})"
        ) from None
    try:
        obs, _ = env.reset(seed=seed)
        drawn = [_render(env)]
        for t, action in enumerate(actions, start=1):
            obs = env.step(action)[0]
            if t in wanted:
                drawn.append(_render(env))
        fps = float(env.metadata.get("render_fps") or 30)
    finally:
        try:
            env.close()
        except Exception:  # a renderer that fails to shut down has already drawn the frames
            pass
    milliseconds = int(min(500, max(20, 1000 * stride / fps)))
    note = None
    if not same_value(obs, last):
        note = "the re-played episode ended elsewhere than the live one; the replay may differ"
    return Replay(gif(drawn, milliseconds), len(drawn), note)


def _render(env: Any) -> np.ndarray:
    try:
        frame = env.render()
    except Exception as exc:
        text = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise ReplayUnavailable(
            f"no replay: this machine cannot render the environment headless ({text})"
        ) from None
    if frame is None:
        raise ReplayUnavailable("no replay: the environment rendered nothing")
    return _fit(frame)
