"""What every turn-based game written here shares: parameters, the episode life, the adapter.

The contest problems (:mod:`evopolicy_mcp.environments.contests`) and the puzzles
(:mod:`evopolicy_mcp.environments.puzzles`) are plain Python and numpy. Each game is one
module with::

    PARAMETERS = {"size": Param(4, 2, 8, "side of the board")}   # name -> rule
    def spec(options: Options) -> EnvSpec: ...
    class Game(TurnEpisode): ...     # Game(options, seed)

and an adapter (:class:`GameAdapter`) serves a family of them, chosen by the
``game`` parameter and imported only when a task that names it is described or
evaluated::

    [parameters]
    game = "2048"
    size = 4

A game's ``_begin()`` returns the first observation and ``_play(action)`` one
:class:`Step`; it raises :class:`InvalidAction` for an action the rules forbid
(never repaired), after which the episode is over and ``metrics()`` still
answer (with ``invalid`` = 1).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from evopolicy_mcp.adapters.protocol import AdapterError, EnvSpec, InvalidAction, Step

__all__ = [
    "GameAdapter",
    "game_spec",
    "int_list",
    "Options",
    "Param",
    "TurnEpisode",
    "parse_options",
]


@dataclass(frozen=True)
class Param:
    """One parameter of a game: a default, an inclusive range (ints) or choices (str)."""

    default: int | str
    low: int | None = None
    high: int | None = None
    meaning: str = ""
    choices: tuple[str, ...] = ()

    def check(self, game: str, name: str, value: Any) -> int | str:
        if self.choices:
            if value not in self.choices:
                raise AdapterError(
                    f"{game}: parameter {name} must be one of {list(self.choices)}, got {value!r}"
                )
            return str(value)
        if (
            not isinstance(value, int)
            or isinstance(value, bool)
            or (self.low is not None and value < self.low)
            or (self.high is not None and value > self.high)
        ):
            raise AdapterError(
                f"{game}: parameter {name} must be an integer in {self.low}..{self.high}"
                f" ({self.meaning}), got {value!r:.60}"
            )
        return value


class Options:
    """Checked parameters of one game, as attributes (``options.size``)."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    def __getattr__(self, name: str) -> Any:  # only reached for a name that is not set
        raise AttributeError(f"no game parameter {name!r}")

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def parse_options(game: str, rules: Mapping[str, Param], parameters: Mapping[str, Any]) -> Options:
    """Defaults filled in, every value checked; unknown names are an :class:`AdapterError`."""
    unknown = sorted(set(parameters) - set(rules) - {"game"})
    if unknown:
        allowed = ", ".join(["game", *rules]) if rules else "game"
        raise AdapterError(f"{game}: unknown parameter(s) {unknown}; allowed: {allowed}")
    return Options(
        **{
            name: rule.check(game, name, parameters.get(name, rule.default))
            for name, rule in rules.items()
        }
    )


INVALID = "1 when the episode ended on an action the rules forbid (invalid_action), else 0"


def game_spec(
    observation_space: dict[str, Any],
    action_space: dict[str, Any],
    metadata: dict[str, Any],
    metrics: Mapping[str, str],
    max_steps: int,
) -> EnvSpec:
    """An :class:`EnvSpec` whose metrics also name ``invalid`` (added by TurnEpisode)."""
    return EnvSpec(
        observation_space=observation_space,
        action_space=action_space,
        metadata=metadata,
        metrics={**metrics, "invalid": INVALID},
        max_steps=max_steps,
    )


def int_list(action: Any, highs: tuple[int, ...], check: Callable[[Any], Any]) -> list[int]:
    """``action`` as a list of ints, each ``0 <= v < highs[i]``: a fast path for a plain
    list or tuple of ints, else ``check`` (the space's validator) decides."""
    if (
        type(action) in (list, tuple)
        and len(action) == len(highs)
        and all(type(v) is int and 0 <= v < h for v, h in zip(action, highs, strict=True))
    ):
        return list(action)
    return [int(v) for v in check(action)]


class TurnEpisode:
    """The life of one episode: new -> running -> over (or invalid) -> closed.

    Subclasses implement ``_begin() -> observation``, ``_play(action) -> Step``
    and ``_metrics() -> dict[str, float]`` (floats; ``invalid`` is added here).
    """

    def __init__(self) -> None:
        self._phase = "new"
        self.invalid_reason = ""

    def reset(self) -> Any:
        if self._phase != "new":
            raise AdapterError(f"reset() on a {self._phase} episode; make a new episode")
        self._phase = "running"
        return self._begin()

    def step(self, action: Any) -> Step:
        if self._phase != "running":
            raise AdapterError(f"step() on a {self._phase} episode (reset() first, once)")
        try:
            step = self._play(action)
        except InvalidAction as exc:
            self._phase = "invalid"
            self.invalid_reason = str(exc)[:200]
            raise
        if step.terminated or step.truncated:
            self._phase = "over"
        return step

    def metrics(self) -> dict[str, float]:
        values = self._metrics()
        values["invalid"] = 1.0 if self._phase == "invalid" else 0.0
        return values

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {"end": self._phase}
        if self.invalid_reason:
            out["invalid_action"] = self.invalid_reason
        out.update(self._report())
        return out

    def close(self) -> None:
        self._phase = "closed"

    def _begin(self) -> Any:
        raise NotImplementedError

    def _play(self, action: Any) -> Step:
        raise NotImplementedError

    def _metrics(self) -> dict[str, float]:
        raise NotImplementedError

    def _report(self) -> dict[str, Any]:
        """Bounded JSON diagnostics of the episode beyond the metrics (optional)."""
        return {}


class GameAdapter:
    """A family of games, one module each, chosen by the ``game`` parameter."""

    def __init__(self, name: str, games: Mapping[str, str], example: str) -> None:
        self.name = name
        self._games = dict(games)  # game name -> module path
        self.example_parameters: dict[str, Any] = {"game": example}

    def module(self, parameters: Mapping[str, Any]) -> Any:
        game = parameters.get("game")
        if game not in self._games:
            known = ", ".join(sorted(self._games))
            what = "is missing" if game is None else f"{str(game)[:40]!r} is unknown"
            raise AdapterError(f"{self.name}: parameter game {what}; games: {known}")
        return importlib.import_module(self._games[game])

    def options(self, parameters: Mapping[str, Any]) -> tuple[Any, Options]:
        module = self.module(parameters)
        return module, parse_options(parameters["game"], module.PARAMETERS, parameters)

    def spec(self, parameters: Mapping[str, Any]) -> EnvSpec:
        module, options = self.options(parameters)
        spec: EnvSpec = module.spec(options)
        return spec

    def make_episode(self, parameters: Mapping[str, Any], seed: int) -> TurnEpisode:
        module, options = self.options(parameters)
        episode: TurnEpisode = module.Game(options, int(seed))
        return episode

    @property
    def games(self) -> list[str]:
        return sorted(self._games)
