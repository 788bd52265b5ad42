"""What a Crafter episode tells the agent: per-step tallies, the report, and replay files.

:class:`Tally` follows an episode in constant memory (a few counters, 8 to 16
samples of the inventory, the set of cells visited) and gives the public
metrics and the bounded report. :func:`replay_files` re-plays a finished
episode from its seed and actions (Crafter is deterministic here) to write a
gzip JSON-lines trajectory and a GIF, so untraced episodes pay nothing for
them. Nothing here imports Crafter; the game object comes from the caller.
"""

from __future__ import annotations

import gzip
import io
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from evopolicy_mcp.adapters.replay import gif
from evopolicy_mcp.environments.crafter.names import ACTIONS, DEATH_CAUSES, FACING, ITEMS, VITALS
from evopolicy_mcp.environments.crafter.scoring import ACHIEVEMENTS, survival_value

__all__ = ["METRICS", "Tally", "replay_files"]

METRICS: dict[str, str] = {
    **{f"achievement_{a}": f"1 if {a} was unlocked in the episode, else 0" for a in ACHIEVEMENTS},
    "achievements": "number of distinct achievements unlocked (0..22)",
    "survival": "the survival value of the episode (0..100; see the crafter-survival task)",
    "died": "1 if the player died (health 0), 0 if it lived to the end or the episode stopped",
    **{
        f"death_{c}": f"1 if the player died and the last health it lost was to {c}, else 0"
        for c in DEATH_CAUSES
    },
}

SAMPLES = 8  # inventory samples: between 8 and 16, evenly spaced, whatever the length
WINDOW = 100  # steps per window of the confinement check
CONFINED_CELLS = 4  # a window spent awake on at most this many cells counts as confined
GIF_FRAMES = 200  # evenly spaced frames, plus every frame of the last LAST_FRAMES steps
LAST_FRAMES = 60
TRAJECTORY_BYTES = 1_000_000


class Tally:
    """Running counters of one episode; :meth:`step` costs a few microseconds."""

    def __init__(self, horizon: int) -> None:
        self.horizon = horizon
        self.steps = 0
        self.actions = [0] * len(ACTIONS)
        self.vitals_sum = 0
        self.first: dict[str, int] = {}
        self.died = False
        self.cause: str | None = None
        self.health_lost: Mapping[str, int] = {}
        self.sleep_steps = 0
        self._stride = 1
        self._samples: list[tuple[int, tuple[int, ...]]] = []
        self._last: tuple[int, tuple[int, ...]] = (0, (0,) * len(ITEMS))
        self._repeat = self._best_repeat = (0, 0, 0)  # action, first step, length
        self._idle = self._best_idle = (0, 0)  # first step, length
        self._before: tuple[Any, ...] = ()
        self._cells: set[tuple[int, int]] = set()
        self._window: set[tuple[int, int]] = set()
        self._window_asleep = 0
        self.windows = self.confined = 0

    def start(self, pos: tuple[int, int], facing: tuple[int, int], inventory: Mapping[str, int]):
        self._observe(0, pos, facing, inventory)

    def step(
        self,
        action: int,
        pos: tuple[int, int],
        facing: tuple[int, int],
        inventory: Mapping[str, int],
        sleeping: bool,
        unlocked: Iterable[str],
    ) -> None:
        t = self.steps = self.steps + 1
        self.actions[action] += 1
        self.vitals_sum += sum(inventory[v] for v in VITALS)
        for name in unlocked:
            self.first.setdefault(name, t)
        kind, since, run = self._repeat
        self._repeat = (kind, since, run + 1) if run and kind == action else (action, t, 1)
        if self._repeat[2] > self._best_repeat[2]:
            self._best_repeat = self._repeat
        before = self._before
        self._observe(t, pos, facing, inventory)
        since, run = self._idle
        self._idle = (since, run + 1) if self._before == before and not sleeping else (t + 1, 0)
        if self._idle[1] > self._best_idle[1]:
            self._best_idle = self._idle
        self.sleep_steps += sleeping
        self._window_asleep += sleeping
        if t % WINDOW == 0:
            self.windows += 1
            awake = self._window_asleep <= WINDOW // 2
            self.confined += awake and len(self._window) <= CONFINED_CELLS
            self._window, self._window_asleep = set(), 0

    def _observe(
        self, t: int, pos: tuple[int, int], facing: tuple[int, int], inventory: Mapping[str, int]
    ) -> None:
        counts = tuple(inventory[i] for i in ITEMS)
        self._before = (pos, facing, counts[4:])
        self._cells.add(pos)
        self._window.add(pos)
        self._last = (t, counts)
        if t % self._stride == 0:
            self._samples.append(self._last)
            if len(self._samples) > 2 * SAMPLES:
                self._samples = self._samples[::2]
                self._stride *= 2

    @property
    def end(self) -> str:
        if self.died:
            return "died"
        return "time_limit" if self.steps >= self.horizon else "stopped"

    def metrics(self) -> dict[str, float]:
        out = {f"achievement_{a}": float(a in self.first) for a in ACHIEVEMENTS}
        out["achievements"] = float(len(self.first))
        out["survival"] = survival_value(self.vitals_sum, self.horizon, len(self.first))
        out["died"] = float(self.died)
        for cause in DEATH_CAUSES:
            out[f"death_{cause}"] = float(self.died and self.cause == cause)
        return out

    def report(self) -> dict[str, Any]:
        """Bounded diagnostics (a few kB whatever the length)."""
        samples = self._samples
        if not samples or samples[-1][0] != self._last[0]:
            samples = [*samples, self._last]
        held = [
            i for i, name in enumerate(ITEMS) if i < 4 or any(counts[i] for _, counts in samples)
        ]
        action, since, run = self._best_repeat
        idle_since, idle_run = self._best_idle
        return {
            "end": self.end,
            "cause_of_death": self.cause if self.died else None,
            "unlocked_at_step": dict(sorted(self.first.items(), key=lambda kv: kv[1])),
            "health_lost_to": dict(sorted(self.health_lost.items())),
            "inventory_samples": {
                "step": [t for t, _ in samples],
                **{ITEMS[i]: [counts[i] for _, counts in samples] for i in held},
            },
            "actions": {ACTIONS[i]: n for i, n in enumerate(self.actions) if n},
            "sleep_steps": self.sleep_steps,
            "stuck": {
                "longest_repeat": {"action": ACTIONS[action], "from_step": since, "steps": run}
                if run
                else None,
                "longest_without_effect": {"from_step": idle_since, "steps": idle_run},
                "confined_windows": self.confined,
                "windows": self.windows,
                "cells_visited": len(self._cells),
            },
        }


class _Writer:
    """JSON lines into a gzip stream, stopping cleanly at a compressed-size limit."""

    def __init__(self, limit: int) -> None:
        self.buffer = io.BytesIO()
        self.stream = gzip.GzipFile(fileobj=self.buffer, mode="wb", mtime=0)
        self.limit = limit
        self.full = False

    def line(self, record: Mapping[str, Any]) -> None:
        if not self.full:
            self.stream.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")
            self.full = self.buffer.tell() > self.limit - 64 * 1024

    def close(self) -> bytes:
        self.stream.close()
        return self.buffer.getvalue()


def replay_files(game: Any, actions: bytes, header: Mapping[str, Any]) -> dict[str, bytes]:
    """Re-play ``actions`` on a fresh ``game`` (same seed) and write the episode's files.

    ``trajectory.jsonl.gz``: a header line, then one line per step: ``t``,
    action ``a``, reward ``r``, position ``pos`` relative to the start,
    ``face``, the material ahead ``ahead``, vitals ``v`` (health, food, drink,
    energy), ``inv`` (items whose count changed), ``unlock`` (new
    achievements), ``sleep`` (1 while asleep), ``light`` (daylight).
    ``replay.gif``: Crafter's own image, evenly spaced frames and then every
    step of the end. The caller checks that ``game`` ended where the live
    episode did.
    """
    steps = len(actions)
    stride = max(1, math.ceil(steps / GIF_FRAMES))
    wanted = set(range(0, steps + 1, stride)) | set(range(max(0, steps - LAST_FRAMES), steps + 1))
    game.reset()
    player = game.player
    start = (int(player.pos[0]), int(player.pos[1]))
    frames = [game.frame()]
    writer = _Writer(TRAJECTORY_BYTES)
    writer.line({"format": "crafter-trajectory/1", **header})
    counts = dict(player.inventory)
    unlocked: set[str] = set()
    for t, action in enumerate(actions, start=1):
        _, reward, _, _ = game.step(action)
        x, y = int(player.pos[0]) - start[0], int(player.pos[1]) - start[1]
        face = (int(player.facing[0]), int(player.facing[1]))
        record: dict[str, Any] = {
            "t": t,
            "a": ACTIONS[action],
            "r": round(float(reward), 3),
            "pos": [x, y],
            "face": FACING[face],
            "ahead": game.ahead(),
            "v": [int(player.inventory[v]) for v in VITALS],
        }
        changed = {k: int(v) for k, v in player.inventory.items() if counts[k] != v}
        if any(k not in VITALS for k in changed):
            record["inv"] = {k: v for k, v in changed.items() if k not in VITALS}
        counts = dict(player.inventory)
        if len(game.unlocked) > len(unlocked):
            record["unlock"] = sorted(game.unlocked - unlocked)
            unlocked = set(game.unlocked)
        if player.sleeping:
            record["sleep"] = 1
        record["light"] = round(game.daylight, 2)
        writer.line(record)
        if t in wanted:
            frames.append(game.frame())
    if writer.full:
        writer.stream.write(b'{"truncated":true}\n')
    return {"trajectory.jsonl.gz": writer.close(), "replay.gif": gif(frames, 100)}
