"""Environment adapters: the plugin protocol and its lazy loader.

An adapter is found through the entry-point group ``evopolicy_mcp.environments``.
Each entry point names a zero-argument factory returning an :class:`Adapter`;
the factory's module is imported only when a task that names it is evaluated
or described, so listing tasks imports no simulator. Built-in adapters in
``evopolicy_mcp/environments/`` register through the same group as third-party ones::

    [project.entry-points."evopolicy_mcp.environments"]
    my_env = "my_package.adapter:make_adapter"

Invariants enforced here and in evaluation:

- An adapter makes one fresh :class:`Episode` per (parameters, seed); the same
  pair replays the same trajectory for the same actions.
- ``Episode.step`` raises :class:`InvalidAction` for an action outside the
  action space. It never clips or repairs.
- Any other exception from adapter code is a host fault: the evaluation aborts
  and the agent is never charged a policy failure for it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, NamedTuple, Protocol

__all__ = [
    "ARTIFACT_BYTES",
    "ENTRY_POINT_GROUP",
    "Adapter",
    "AdapterError",
    "EnvSpec",
    "Episode",
    "InvalidAction",
    "Step",
    "available_adapters",
    "load_adapter",
]

ENTRY_POINT_GROUP = "evopolicy_mcp.environments"
ARTIFACT_BYTES = 8 << 20  # all files ``Episode.artifacts()`` returns for one episode
log = logging.getLogger(__name__)


class InvalidAction(Exception):
    """The policy's action is not in the action space. The message says why."""


class AdapterError(Exception):
    """An adapter cannot be loaded or was given parameters it cannot use."""


class Step(NamedTuple):
    """What one ``Episode.step`` returns. A named tuple: made every step, it costs a third
    of a microsecond where a frozen dataclass costs twice that."""

    observation: Any
    reward: float
    terminated: bool
    truncated: bool


@dataclass(frozen=True)
class EnvSpec:
    """The public description of an environment under given parameters.

    ``observation_space`` / ``action_space`` are JSON-able dicts with a ``type``
    key (``box``, ``discrete``, ``tuple``, ``dict``, ...) and a ``description``
    a person writing a controller can use (component names and meanings).
    ``metrics`` names the per-episode public metrics ``Episode.metrics`` returns
    and what each means.
    """

    observation_space: dict[str, Any]
    action_space: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, str] = field(default_factory=dict)
    max_steps: int | None = None


class Episode(Protocol):
    """One fresh environment for one episode.

    Two methods are optional (see :mod:`evopolicy_mcp.evaluation.episodes`):
    ``report() -> dict`` of bounded JSON diagnostics for the episode summary,
    and ``artifacts() -> dict[str, bytes]`` of files for a traced training
    episode. Both are read after the last step, before ``close()``.
    """

    def reset(self) -> Any:
        """Return the first observation."""

    def step(self, action: Any) -> Step:
        """Apply ``action``; raise :class:`InvalidAction` if it is not valid."""

    def metrics(self) -> dict[str, float]:
        """Public per-episode metrics, read once when the episode ends (also
        after a policy failure)."""

    def close(self) -> None: ...


class Adapter(Protocol):
    name: str

    def spec(self, parameters: Mapping[str, Any]) -> EnvSpec:
        """Public spaces and metadata; raise :class:`AdapterError` for bad
        parameters."""

    def make_episode(self, parameters: Mapping[str, Any], seed: int) -> Episode: ...


def available_adapters() -> list[str]:
    """Names registered in the entry-point group (nothing is imported)."""
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


_loaded: dict[str, Adapter] = {}


def load_adapter(name: str) -> Adapter:
    """Import and build the adapter registered as ``name`` (cached)."""
    if name in _loaded:
        return _loaded[name]
    matches = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not matches:
        known = ", ".join(available_adapters()) or "none"
        raise AdapterError(f"no adapter named {name!r} is installed (installed: {known})")
    try:
        adapter = matches[0].load()()
    except Exception as exc:  # a broken plugin is reported, not fatal to the caller
        log.warning("adapter %s failed to load: %s", name, exc)
        raise AdapterError(f"adapter {name!r} failed to load: {exc}") from exc
    _loaded[name] = adapter
    return adapter
