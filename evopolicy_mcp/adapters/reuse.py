"""Environments kept for reuse, for simulators that take seconds to construct.

Most environments are made fresh for every episode. A few take far longer to
build than to play an episode (robosuite compiles its MuJoCo model for 3-6 s,
Meta-World for about 1 s, against an episode of a fraction of that); a family
whose seeded reset restores everything (``Texts(reuse=True)``) gets its finished
environments back from here instead. The replay checks of ``check-adapter``
compare an episode in a reused environment with one in a fresh process, so a
reset that forgets something fails there.

At most :data:`IDLE_PER_KEY` idle environments per set of parameters and
:data:`IDLE_TOTAL` in all are kept; the oldest is closed first, and whatever is
idle when the interpreter exits is closed then.
"""

from __future__ import annotations

import atexit
import threading
from collections import OrderedDict
from typing import Any

__all__ = ["IDLE_PER_KEY", "IDLE_TOTAL", "Idle"]

IDLE_PER_KEY = 2  # an evaluation's episodes at once on this machine's two CPUs
IDLE_TOTAL = 6


def _close(env: Any) -> None:
    try:
        env.close()
    except Exception:  # an environment that fails to close has nothing more to give
        pass


class Idle:
    """Idle environments by key (a task's parameters), oldest first."""

    def __init__(self, per_key: int = IDLE_PER_KEY, total: int = IDLE_TOTAL) -> None:
        self.per_key = per_key
        self.total = total
        self._envs: OrderedDict[int, tuple[str, Any]] = OrderedDict()
        self._next = 0
        self._lock = threading.Lock()
        atexit.register(self.clear)

    def take(self, key: str) -> Any | None:
        """An idle environment made for ``key``, or None."""
        with self._lock:
            for ticket, (k, env) in reversed(self._envs.items()):
                if k == key:
                    del self._envs[ticket]
                    return env
        return None

    def give(self, key: str, env: Any) -> None:
        """Keep ``env`` for a later episode of ``key`` (closing the oldest beyond the caps)."""
        evicted = []
        with self._lock:
            self._envs[self._next] = (key, env)
            self._next += 1
            same = [t for t, (k, _) in self._envs.items() if k == key]
            for ticket in same[: max(0, len(same) - self.per_key)]:
                evicted.append(self._envs.pop(ticket)[1])
            while len(self._envs) > self.total:
                evicted.append(self._envs.popitem(last=False)[1][1])
        for old in evicted:
            _close(old)

    def __len__(self) -> int:
        return len(self._envs)

    def clear(self) -> None:
        with self._lock:
            envs = [env for _, env in self._envs.values()]
            self._envs.clear()
        for env in envs:
            _close(env)
