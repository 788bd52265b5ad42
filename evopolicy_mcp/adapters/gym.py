"""The kit's Gymnasium adapter: any registered Gymnasium id, from any installed package.

A task names the id and, when another package registers it, that package::

    [parameters]
    env_id = "MiniGrid-DoorKey-8x8-v0"
    package = "minigrid"          # imported first; it registers the id (declared, never guessed)
    kwargs = { see_through_walls = false }   # constructor arguments, optional
    max_episode_steps = 640       # optional; overrides the id's own limit

Spaces are described from Gymnasium's own space objects (bounds, shapes,
dtypes); a family adds what they mean through :class:`Texts`, one per id or one
for a whole family (its functions read the live environment, so the texts
cannot drift from it). A family is then a few lines::

    def make_adapter() -> GymAdapter:
        return GymAdapter("minigrid", default=MINIGRID, package="minigrid", extra="minigrid")

Traced training episodes of environments that render get a ``replay.gif``,
re-played on the host from the episode's seed and actions
(:mod:`evopolicy_mcp.adapters.replay`); where this machine cannot render, the
episode's report says so instead. Gymnasium and the family's package are
imported only when a spec or an episode is asked for.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evopolicy_mcp.adapters import replay, spaces
from evopolicy_mcp.adapters.protocol import AdapterError, EnvSpec, Step
from evopolicy_mcp.adapters.replay import GIF_FRAMES
from evopolicy_mcp.adapters.reuse import Idle

__all__ = [
    "Describe",
    "GymAdapter",
    "GymEpisode",
    "Kwarg",
    "Tally",
    "Texts",
    "Watch",
]

PARAMETERS = ("env_id", "package", "kwargs", "max_episode_steps")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
MESSAGE_CHARS = 200


@dataclass
class Tally:
    """Running facts about one episode, from which the metrics are computed."""

    steps: int = 0
    terminated: bool = False
    truncated: bool = False
    last_reward: float = 0.0
    total_reward: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)  # the last step's info


@dataclass(frozen=True)
class Kwarg:
    """A constructor argument a task may set through ``parameters.kwargs``."""

    types: tuple[type, ...]
    default: Any
    choices: tuple[Any, ...] | None = None


Describe = Callable[[Any, Mapping[str, Any]], dict[str, Any]]


class Watch(Protocol):
    """Follows one episode step by step, for a family's own metrics and report."""

    def start(self, observation: Any) -> None: ...

    def step(self, action: Any, observation: Any, reward: float, info: Mapping[str, Any]) -> None:
        """After each step; costs a few microseconds (it runs on every step)."""

    def metrics(self) -> dict[str, float]: ...

    def report(self) -> dict[str, Any]:
        """Bounded JSON diagnostics (a few kB whatever the length)."""


Record = Callable[
    [Callable[..., Any], int, Sequence[Any], Any], tuple[dict[str, bytes], str | None]
]


def _nothing(env: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    return {}


def _no_metrics(t: Tally) -> dict[str, float]:
    return {}


@dataclass(frozen=True)
class Texts:
    """What a family tells a controller writer about an environment id.

    ``observation`` and ``action`` give keyword arguments for
    :func:`~evopolicy_mcp.adapters.spaces.describe_gymnasium_space` from the
    unwrapped environment and the constructor settings. ``kwargs`` lists the
    constructor arguments a task may set (checked here); ``None`` passes any on
    to the constructor, which rejects what it does not take. ``counters`` are
    predicates over ``(observation, reward, info)`` counted every step;
    ``outcome`` turns the tally into the declared ``metrics``. ``horizon`` gives
    the step limit of ids whose limit lives inside the environment (MiniGrid's
    ``max_steps``). ``replay = False`` for environments that cannot render;
    ``replay_kwargs`` are render-only constructor arguments (a frame size) and
    ``replay_frames`` bounds the frames drawn where rendering is slow.

    For simulators that need more: ``seed(env, seed)`` seeds, on the unwrapped
    environment, what ``reset(seed=)`` does not (NetHack's own generators), before
    every reset, the replay's included. ``watch(env, settings)`` makes a
    :class:`Watch` that follows each episode for a richer report and more
    metrics. ``record(make, seed, actions, last)`` writes a traced episode's files
    instead of ``replay.gif`` (a text replay): ``make(**kwargs)`` gives a fresh,
    seeded environment to re-play in; it returns the files and a note, or raises
    :class:`~evopolicy_mcp.adapters.replay.ReplayUnavailable`. ``reuse = True``
    keeps finished environments for later episodes with the same parameters
    (:mod:`evopolicy_mcp.adapters.reuse`), for simulators that take longer to
    build than to play and whose seeded reset restores everything.
    """

    observation: Describe = _nothing
    action: Describe = _nothing
    reward: str = "as the environment defines it"
    termination: str = "as the environment defines it; truncated at the step limit"
    metrics: dict[str, str] = field(default_factory=dict)
    outcome: Callable[[Tally], dict[str, float]] = _no_metrics
    kwargs: dict[str, Kwarg] | None = None
    counters: dict[str, Callable[[Any, float, Mapping[str, Any]], bool]] = field(
        default_factory=dict
    )
    default_max_steps: int | None = None
    horizon: Callable[[Any], int | None] | None = None
    extra: Describe = _nothing
    replay: bool = True
    replay_kwargs: dict[str, Any] = field(default_factory=dict)
    replay_frames: int = GIF_FRAMES  # fewer where rendering is slow (software GL)
    seed: Callable[[Any, int], None] | None = None
    watch: Callable[[Any, Mapping[str, Any]], Watch] | None = None
    record: Record | None = None
    reuse: bool = False


GENERIC = Texts()


def _comes_with(extra: str | None) -> str:
    return f"; it comes with the [{extra}] extra" if extra else ""


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 3] + "..."


class _Config:
    """Checked parameters: the id, the package that registers it, constructor arguments,
    step limit."""

    def __init__(self, adapter: GymAdapter, parameters: Mapping[str, Any]) -> None:
        unknown = sorted(set(parameters) - set(PARAMETERS))
        if unknown:
            raise AdapterError(
                f"unknown {adapter.name} parameter(s) {', '.join(map(repr, unknown))}; "
                f"allowed: {', '.join(PARAMETERS)} (constructor arguments go in 'kwargs')"
            )
        env_id = parameters.get("env_id")
        texts = adapter.catalogue.get(env_id) if isinstance(env_id, str) else None
        if texts is None:
            texts = adapter.default
        if not isinstance(env_id, str) or texts is None:
            supported = ", ".join(sorted(adapter.catalogue)) or "none"
            what = "is missing" if env_id is None else f"{env_id!r} is not supported"
            raise AdapterError(f"parameter env_id {what}; supported: {supported}")
        package = parameters.get("package", adapter.package)
        if package is not None and (not isinstance(package, str) or not _MODULE.fullmatch(package)):
            raise AdapterError(f"parameter package must be a module name, got {package!r}")
        self.adapter = adapter
        self.key = json.dumps(dict(parameters), sort_keys=True, default=str)
        self.env_id: str = env_id
        self.package: str | None = package
        self.texts: Texts = texts
        self.kwargs = self._check_kwargs(parameters.get("kwargs", {}))
        rules = texts.kwargs or {}
        self.settings = {
            **{name: rule.default for name, rule in rules.items()},
            **self.kwargs,
        }
        steps = parameters.get("max_episode_steps", texts.default_max_steps)
        if steps is not None and (
            not isinstance(steps, int) or isinstance(steps, bool) or steps < 1
        ):
            raise AdapterError(f"max_episode_steps must be a positive integer, got {steps!r}")
        self.max_episode_steps: int | None = steps

    def _check_kwargs(self, kwargs: Any) -> dict[str, Any]:
        if not isinstance(kwargs, Mapping):
            raise AdapterError(f"parameter kwargs must be a table, got {type(kwargs).__name__}")
        allowed = self.texts.kwargs
        for name, value in kwargs.items():
            if name in ("max_episode_steps", "render_mode"):
                raise AdapterError(
                    f"{name} is not a constructor argument here"
                    + (" (put it in parameters)" if name == "max_episode_steps" else "")
                )
            if allowed is None:
                continue
            if name not in allowed:
                known = ", ".join(allowed) or "none"
                raise AdapterError(
                    f"{self.env_id} takes no constructor argument {name!r}; allowed: {known}"
                )
            rule = allowed[name]
            # bool is an int in Python; a flag is not a number here.
            ok = isinstance(value, rule.types) and (
                bool in rule.types or not isinstance(value, bool)
            )
            if not ok or (rule.choices is not None and value not in rule.choices):
                want = f"one of {list(rule.choices)}" if rule.choices else _type_names(rule.types)
                raise AdapterError(f"{self.env_id} kwargs.{name} must be {want}, got {value!r}")
        return dict(kwargs)

    def make(self, **extra: Any) -> Any:
        gymnasium = self.adapter.import_packages(self.package, self.env_id)
        try:
            # Actions are validated before they reach the environment, so the passive
            # checker (and its warnings) would only cost time.
            return gymnasium.make(
                self.env_id,
                max_episode_steps=self.max_episode_steps,
                disable_env_checker=True,
                **{**self.kwargs, **extra},  # a replay's own arguments win
            )
        except (gymnasium.error.DependencyNotInstalled, ImportError) as exc:
            raise AdapterError(
                f"cannot make {self.env_id}: {_short(exc)}{_comes_with(self.adapter.extra)}"
            ) from None
        except (gymnasium.error.Error, TypeError, ValueError, KeyError, AssertionError) as exc:
            raise AdapterError(f"cannot make {self.env_id}: {_short(exc)}") from None

    def take(self) -> Any:
        """An environment for an episode: an idle one where the family reuses them."""
        found = self.adapter.idle.take(self.key) if self.texts.reuse else None
        return found if found is not None else self.make()

    def done(self, env: Any, reusable: bool) -> None:
        """Close ``env``, or keep it for a later episode where the family reuses them."""
        if reusable and self.texts.reuse:
            self.adapter.idle.give(self.key, env)
        else:
            env.close()


def _type_names(types: tuple[type, ...]) -> str:
    if float in types:
        return "a number"
    return {bool: "true or false", str: "a string"}.get(types[0], "an integer")


class GymAdapter:
    """An adapter over Gymnasium ids: those of ``catalogue`` with their texts, and any
    other id with ``default`` texts (``None``: catalogue ids only)."""

    def __init__(
        self,
        name: str,
        catalogue: Mapping[str, Texts] | None = None,
        *,
        default: Texts | None = GENERIC,
        package: str | None = None,
        extra: str | None = None,
        example_parameters: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.catalogue = dict(catalogue or {})
        self.default = default
        self.package = package
        self.extra = extra
        self.example_parameters = dict(example_parameters or {})
        self._specs: dict[str, tuple[EnvSpec, spaces.Validator]] = {}
        self._lock = threading.Lock()
        self.idle = Idle()

    @property
    def supported(self) -> list[str]:
        return sorted(self.catalogue)

    def import_packages(self, package: str | None, env_id: str) -> Any:
        """Gymnasium and the package that registers ``env_id``; a clear error if missing."""
        # Headless rendering for replays: MuJoCo reads MUJOCO_GL when it is first imported;
        # pygame (Box2D, MiniGrid, HighwayEnv) draws off-screen and plays no sound.
        for name, value in (("MUJOCO_GL", "egl"), ("SDL_VIDEODRIVER", "dummy")):
            os.environ.setdefault(name, value)
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
        import gymnasium

        if package is not None:
            try:
                importlib.import_module(package)
            except ImportError as exc:
                raise AdapterError(
                    f"{env_id} needs the package {package!r}, which cannot be imported "
                    f"({_short(exc)}){_comes_with(self.extra)}"
                ) from None
        return gymnasium

    def spec(self, parameters: Mapping[str, Any]) -> EnvSpec:
        return self._prepared(parameters)[1][0]

    def make_episode(self, parameters: Mapping[str, Any], seed: int) -> GymEpisode:
        config, (spec, validator) = self._prepared(parameters)
        return GymEpisode(config, spec, validator, seed)

    def _prepared(
        self, parameters: Mapping[str, Any]
    ) -> tuple[_Config, tuple[EnvSpec, spaces.Validator]]:
        config = _Config(self, parameters)
        with self._lock:
            if config.key not in self._specs:
                spec = _build_spec(config)
                self._specs[config.key] = (spec, spaces.action_validator(spec.action_space))
            return config, self._specs[config.key]


def _build_spec(config: _Config) -> EnvSpec:
    env = config.take()
    described = False
    try:
        raw, texts, settings = env.unwrapped, config.texts, config.settings
        try:
            observation = spaces.describe_gymnasium_space(
                env.observation_space, **texts.observation(raw, settings)
            )
            action = spaces.describe_gymnasium_space(
                env.action_space, **texts.action(raw, settings)
            )
        except TypeError as exc:
            raise AdapterError(f"{config.env_id}: {exc}") from None
        max_steps = env.spec.max_episode_steps if env.spec is not None else None
        if max_steps is None and texts.horizon is not None:
            max_steps = texts.horizon(raw)
        extra = texts.extra(raw, settings)
        described = True
    finally:
        config.done(env, reusable=described)
    import gymnasium

    metadata = {
        "env_id": config.env_id,
        "gymnasium_version": gymnasium.__version__,
        "kwargs": dict(config.kwargs),
        "settings": dict(settings),
        "max_episode_steps": max_steps,
        "reward": texts.reward,
        "termination": texts.termination,
        **extra,
    }
    return EnvSpec(
        observation_space=observation,
        action_space=action,
        metadata=metadata,
        metrics=dict(texts.metrics),
        max_steps=max_steps,
    )


def _public(obs: Any) -> Any:
    """Arrays stay numpy arrays, numpy scalars become Python values, tuples become lists."""
    value = spaces.plain(obs)
    return list(value) if isinstance(value, tuple) else value


class GymEpisode:
    """One fresh Gymnasium environment (or a reused one, reset alike), seeded at reset."""

    def __init__(
        self, config: _Config, spec: EnvSpec, validator: spaces.Validator, seed: int
    ) -> None:
        self.spec = spec
        self._config = config
        self._texts = config.texts
        self._validate = validator
        self._seed = int(seed)
        self._env: Any = config.take()
        self._watch: Watch | None = None
        self._tally = Tally()
        self._actions: list[Any] = []  # what the replay re-plays
        self._last: Any = None
        self._note: str | None = None
        self._started = False
        self._closed = False
        self._intact = True  # False once the environment raised: never reused then

    def _seeded(self, env: Any) -> Any:
        if self._texts.seed is not None:
            self._texts.seed(env.unwrapped, self._seed)
        return env

    def reset(self) -> Any:
        if self._closed:
            raise AdapterError("this episode is closed; make a new one")
        self._intact = False
        obs, _ = self._seeded(self._env).reset(seed=self._seed)
        self._env.action_space.seed(self._seed)
        self._intact = True
        self._tally = Tally()
        self._actions.clear()
        self._started = True
        self._last = obs
        if self._texts.watch is not None:
            self._watch = self._texts.watch(self._env.unwrapped, self._config.settings)
            self._watch.start(obs)
        return _public(obs)

    def step(self, action: Any) -> Step:
        if not self._started or self._closed:
            raise AdapterError("step() needs a reset() first (and an open episode)")
        tally = self._tally
        if tally.terminated or tally.truncated:
            raise AdapterError("the episode is over; make a new episode for the next one")
        env_action = self._validate(action)  # raises InvalidAction, never clips
        self._intact = False
        obs, reward, terminated, truncated, info = self._env.step(env_action)
        self._intact = True
        self._actions.append(env_action)
        self._last = obs
        obs, reward = _public(obs), float(reward)
        tally.steps += 1
        tally.terminated, tally.truncated = bool(terminated), bool(truncated)
        tally.last_reward = reward
        tally.total_reward += reward
        tally.info = info
        for name, hit in self._texts.counters.items():
            if hit(obs, reward, info):
                tally.counts[name] = tally.counts.get(name, 0) + 1
        if self._watch is not None:
            self._watch.step(env_action, obs, reward, info)
        return Step(obs, reward, tally.terminated, tally.truncated)

    def metrics(self) -> dict[str, float]:
        found = self._texts.outcome(self._tally)
        if self._watch is not None:
            found = {**found, **self._watch.metrics()}
        return {k: float(v) for k, v in found.items()}

    def artifacts(self) -> dict[str, bytes]:
        """``replay.gif`` of this episode (or the family's own files), re-played from its
        seed and actions."""
        texts = self._texts
        if not texts.replay or not self._actions:
            return {}
        config = self._config

        def make(**kwargs: Any) -> Any:
            return self._seeded(config.make(**kwargs))

        try:
            if texts.record is not None:
                files, self._note = texts.record(make, self._seed, self._actions, self._last)
                return files
            made = replay.replay_gif(
                lambda: make(render_mode="rgb_array", **texts.replay_kwargs),
                self._seed,
                self._actions,
                self._last,
                texts.replay_frames,
            )
        except replay.ReplayUnavailable as exc:
            self._note = str(exc)
            return {}
        self._note = made.note
        return {"replay.gif": made.gif}

    def report(self) -> dict[str, Any] | None:
        """The family's report, if it follows episodes, and what the replay's maker has to
        say (why there is none, for one)."""
        found = self._watch.report() if self._watch is not None else {}
        if self._note:
            found = {**found, "replay": self._note}
        return found or None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._config.done(self._env, reusable=self._intact)
