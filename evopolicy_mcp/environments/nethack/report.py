"""What a NetHack or MiniHack episode tells the agent: per-step tallies and the report.

:class:`Tally` is the family's :class:`~evopolicy_mcp.adapters.gym.Watch`. It follows
an episode in constant memory (counters, 8 to 16 samples of the bottom line, the set
of map cells visited) for a step cost of a few microseconds, and gives the public
metrics and a bounded report: how the episode ended and why (NetHack's own death
message), the depth and experience reached and when, the score over time, the last
messages, an action histogram and signs of being stuck. The NetHack object comes from
the caller; nothing here imports NLE.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evopolicy_mcp.environments.nethack.names import END_STATUS

__all__ = ["METRICS", "Tally"]

METRICS: dict[str, str] = {
    "score": "the in-game score on the bottom line at the last step in the game",
    "max_depth": "the deepest dungeon level reached (1 = the first level)",
    "max_experience_level": "the highest experience level reached (1 at the start)",
    "turns": "game turns elapsed (the bottom line's time)",
    "gold": "gold carried at the last step in the game",
    "died": "1 if the hero died, else 0",
    "success": "1 if the task's goal was reached (NLE's task_successful end), else 0",
}

# Bottom-line indices (NLE's NLE_BL_*).
X, Y, SCORE, HP, HPMAX, DEPTH, GOLD, XL, TIME, HUNGER, DNUM, DLEVEL = (
    0,
    1,
    9,
    10,
    11,
    12,
    13,
    18,
    20,
    21,
    23,
    24,
)
SAMPLED = {"score": SCORE, "depth": DEPTH, "experience_level": XL, "hitpoints": HP, "turn": TIME}
SAMPLES = 8  # between 8 and 16 bottom-line samples, evenly spaced, whatever the length
WINDOW = 100  # steps per window of the confinement check
CONFINED_CELLS = 4
MESSAGES = 8  # last distinct messages kept
MESSAGE_CHARS = 120
COMMON_MESSAGES = 5
MESSAGE_KINDS = 200  # distinct messages counted; later new ones are not


class Tally:
    """Running counters of one episode; :meth:`step` costs a few microseconds."""

    def __init__(self, env: Any, labels: Sequence[str], horizon: int | None) -> None:
        self._env = env  # the NLE environment: how the game ended, its logs
        self._labels = list(labels)
        self._horizon = horizon
        self.steps = 0
        self.actions = [0] * len(labels)
        self.status = 0  # NLE's end_status of the last step
        self._bottom: list[int] | None = None  # the last bottom line while in the game
        self.max_depth = self.max_level = 0
        self.depth_at: dict[int, int] = {}
        self.level_at: dict[int, int] = {}
        self._stride = 1
        self._samples: list[tuple[int, list[int]]] = []
        self._repeat = self._best_repeat = (0, 0, 0)  # action, first step, length
        self._frozen = self._best_frozen = (0, 0)  # first step, length
        self.frozen_steps = 0
        self._cells: set[tuple[int, int, int, int]] = set()
        self._window: set[tuple[int, int, int, int]] = set()
        self.windows = self.confined = 0
        self._messages: deque[str] = deque(maxlen=MESSAGES)
        self._message_counts: Counter[str] = Counter()
        self._ending: dict[str, Any] | None = None

    # --- following the episode -------------------------------------------------

    def start(self, observation: Any) -> None:
        self._observe(0, observation)

    def step(self, action: Any, observation: Any, reward: float, info: Mapping[str, Any]) -> None:
        t = self.steps = self.steps + 1
        self.actions[action] += 1
        kind, since, run = self._repeat
        self._repeat = (kind, since, run + 1) if run and kind == action else (action, t, 1)
        if self._repeat[2] > self._best_repeat[2]:
            self._best_repeat = self._repeat
        self.status = int(info.get("end_status", 0))
        before = self._bottom
        self._observe(t, observation)
        if before is not None and self._bottom is not None and self._bottom[TIME] == before[TIME]:
            self.frozen_steps += 1
            since, run = self._frozen
            self._frozen = (since, run + 1) if run else (t, 1)
            if self._frozen[1] > self._best_frozen[1]:
                self._best_frozen = self._frozen
        else:
            self._frozen = (0, 0)
        if t % WINDOW == 0:
            self.windows += 1
            self.confined += len(self._window) <= CONFINED_CELLS
            self._window = set()

    def _observe(self, t: int, observation: Mapping[str, Any]) -> None:
        message = observation.get("message")
        if message is not None and message[0]:
            text = bytes(message).rstrip(b"\0").decode("latin-1")[:MESSAGE_CHARS]
            if not self._messages or self._messages[-1] != text:
                self._messages.append(text)
            if text in self._message_counts or len(self._message_counts) < MESSAGE_KINDS:
                self._message_counts[text] += 1
        bottom = observation["blstats"].tolist()
        if bottom[HPMAX] <= 0:  # before the game starts and after it ends: all zeros
            return
        self._bottom = bottom
        depth, level = bottom[DEPTH], bottom[XL]
        if depth > self.max_depth:
            self.max_depth = depth
            self.depth_at.setdefault(depth, t)
        if level > self.max_level:
            self.max_level = level
            self.level_at.setdefault(level, t)
        cell = (bottom[DNUM], bottom[DLEVEL], bottom[X], bottom[Y])
        self._cells.add(cell)
        self._window.add(cell)
        if t % self._stride == 0:
            self._samples.append((t, bottom))
            if len(self._samples) > 2 * SAMPLES:
                self._samples = self._samples[::2]
                self._stride *= 2

    # --- the end -----------------------------------------------------------------

    @property
    def end(self) -> str:
        """death, task_successful, time_limit, or stopped (the policy failed first)."""
        if self.status in (1, 2):
            return END_STATUS[self.status]
        if self.status == -1 or (self._horizon is not None and self.steps >= self._horizon):
            return "time_limit"  # NLE aborts an episode at its step limit
        return "stopped"

    def _ended(self) -> dict[str, Any]:
        """How the game ended, read once from NetHack after the last step."""
        if self._ending is None:
            self._ending = {"how": None, "death": None}
            if self.status == 1:
                self._ending = {"how": _how_done(self._env), "death": _death(self._env)}
        return self._ending

    def metrics(self) -> dict[str, float]:
        bottom = self._bottom or [0] * 27
        return {
            "score": float(bottom[SCORE]),
            "max_depth": float(self.max_depth),
            "max_experience_level": float(self.max_level),
            "turns": float(bottom[TIME]),
            "gold": float(bottom[GOLD]),
            "died": float(self.status == 1),
            "success": float(self.status == 2),
        }

    def report(self) -> dict[str, Any]:
        """Bounded diagnostics (a few kB whatever the length)."""
        bottom = self._bottom or [0] * 27
        samples = self._samples
        if self._bottom is not None and (not samples or samples[-1][1] is not self._bottom):
            samples = [*samples, (self.steps, self._bottom)]
        action, since, run = self._best_repeat
        frozen_since, frozen_run = self._best_frozen
        ending = self._ended()
        return {
            "end": self.end,
            "death": ending["death"],
            "how": ending["how"],
            "final": {
                "score": bottom[SCORE],
                "depth": bottom[DEPTH],
                "experience_level": bottom[XL],
                "hitpoints": [bottom[HP], bottom[HPMAX]],
                "gold": bottom[GOLD],
                "turns": bottom[TIME],
                "hunger_state": bottom[HUNGER],
            },
            "depth_reached_at_step": {str(d): s for d, s in sorted(self.depth_at.items())},
            "experience_level_at_step": {str(x): s for x, s in sorted(self.level_at.items())},
            "samples": {
                "step": [t for t, _ in samples],
                **{name: [b[i] for _, b in samples] for name, i in SAMPLED.items()},
            },
            "last_messages": list(self._messages),
            "common_messages": dict(self._message_counts.most_common(COMMON_MESSAGES)),
            "actions": {self._labels[i]: n for i, n in enumerate(self.actions) if n},
            "stuck": {
                "longest_repeat": {
                    "action": self._labels[action],
                    "from_step": since,
                    "steps": run,
                }
                if run
                else None,
                "steps_without_game_time": self.frozen_steps,
                "longest_without_game_time": {"from_step": frozen_since, "steps": frozen_run},
                "cells_visited": len(self._cells),
                "confined_windows": self.confined,
                "windows": self.windows,
            },
        }


def _how_done(env: Any) -> str | None:
    try:
        return str(env.nethack.how_done().name).lower()
    except Exception:  # an NLE without it: the death message still says why
        return None


def _death(env: Any) -> str | None:
    """NetHack's own death message ('killed by a jackal'), from the game's log."""
    try:
        log = Path(env.nethack._vardir) / "xlogfile"
        lines = log.read_text("latin-1").splitlines()
    except (AttributeError, OSError):
        return None
    if not lines:
        return None
    fields = dict(f.split("=", 1) for f in lines[-1].split("\t") if "=" in f)
    death = fields.get("death")
    return death[:MESSAGE_CHARS] if death else None
