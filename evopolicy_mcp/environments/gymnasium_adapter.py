"""The Gymnasium adapter: one adapter for every supported Gymnasium environment.

A task chooses the environment through its parameters::

    [parameters]
    env_id = "FrozenLake-v1"
    max_episode_steps = 200                           # optional; overrides the id's limit
    kwargs = { map_name = "8x8", is_slippery = true } # optional constructor arguments

Gymnasium is imported only when a spec or an episode is needed, so listing
adapters or tasks costs nothing. The public space descriptions come from the
live environment plus the texts in :mod:`evopolicy_mcp.environments.gymnasium_catalog`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import AdapterError, EnvSpec, Step
from evopolicy_mcp.environments.gymnasium_catalog import CATALOG, EnvInfo, Tally

__all__ = ["GymnasiumAdapter", "GymnasiumEpisode", "make_adapter"]

PARAMETERS = ("env_id", "kwargs", "max_episode_steps")


class _Config:
    """Checked parameters: the environment id, its constructor arguments and step limit."""

    def __init__(self, parameters: Mapping[str, Any]) -> None:
        unknown = sorted(set(parameters) - set(PARAMETERS))
        if unknown:
            raise AdapterError(
                f"unknown gymnasium parameter(s) {', '.join(map(repr, unknown))}; "
                f"allowed: {', '.join(PARAMETERS)} (constructor arguments go in 'kwargs')"
            )
        env_id = parameters.get("env_id")
        if env_id not in CATALOG:
            supported = ", ".join(sorted(CATALOG))
            what = "is missing" if env_id is None else f"{env_id!r} is not supported"
            raise AdapterError(f"parameter env_id {what}; supported: {supported}")
        self.env_id: str = env_id
        self.info: EnvInfo = CATALOG[env_id]
        self.kwargs = self._check_kwargs(parameters.get("kwargs", {}))
        self.settings = {
            name: self.kwargs.get(name, rule.default) for name, rule in self.info.kwargs.items()
        }
        steps = parameters.get("max_episode_steps", self.info.default_max_steps)
        if steps is not None and (
            not isinstance(steps, int) or isinstance(steps, bool) or steps < 1
        ):
            raise AdapterError(f"max_episode_steps must be a positive integer, got {steps!r}")
        self.max_episode_steps: int | None = steps

    def _check_kwargs(self, kwargs: Any) -> dict[str, Any]:
        if not isinstance(kwargs, Mapping):
            raise AdapterError(f"parameter kwargs must be a table, got {type(kwargs).__name__}")
        allowed = self.info.kwargs
        for name, value in kwargs.items():
            if name == "max_episode_steps":
                raise AdapterError("put max_episode_steps in parameters, not in parameters.kwargs")
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

    def make(self) -> Any:
        import gymnasium

        # Actions are validated here before they reach the environment, so the
        # passive checker (and its warnings) would only cost time.
        return gymnasium.make(
            self.env_id,
            max_episode_steps=self.max_episode_steps,
            disable_env_checker=True,
            **self.kwargs,
        )


def _type_names(types: tuple[type, ...]) -> str:
    if float in types:
        return "a number"
    return {bool: "true or false", str: "a string"}.get(types[0], "an integer")


class GymnasiumAdapter:
    """Adapter over Gymnasium environment ids listed in the catalog."""

    name = "gymnasium"
    example_parameters: dict[str, Any] = {"env_id": "CartPole-v1"}

    def __init__(self) -> None:
        self._specs: dict[str, tuple[EnvSpec, spaces.Validator]] = {}
        self._lock = threading.Lock()

    @property
    def supported(self) -> list[str]:
        return sorted(CATALOG)

    def spec(self, parameters: Mapping[str, Any]) -> EnvSpec:
        return self._prepared(parameters)[1][0]

    def make_episode(self, parameters: Mapping[str, Any], seed: int) -> GymnasiumEpisode:
        config, (spec, validator) = self._prepared(parameters)
        return GymnasiumEpisode(config, spec, validator, seed)

    def _prepared(
        self, parameters: Mapping[str, Any]
    ) -> tuple[_Config, tuple[EnvSpec, spaces.Validator]]:
        config = _Config(parameters)
        key = json.dumps(dict(parameters), sort_keys=True, default=str)
        with self._lock:
            if key not in self._specs:
                spec = _build_spec(config)
                self._specs[key] = (spec, spaces.action_validator(spec.action_space))
            return config, self._specs[key]


def _build_spec(config: _Config) -> EnvSpec:
    import gymnasium

    env = config.make()
    try:
        raw, info, settings = env.unwrapped, config.info, config.settings
        observation = spaces.describe_gymnasium_space(
            env.observation_space, **info.observation(raw, settings)
        )
        action = spaces.describe_gymnasium_space(env.action_space, **info.action(raw, settings))
        max_steps = env.spec.max_episode_steps if env.spec is not None else None
    finally:
        env.close()
    metadata = {
        "env_id": config.env_id,
        "gymnasium_version": gymnasium.__version__,
        "kwargs": dict(config.kwargs),
        "settings": dict(settings),
        "max_episode_steps": max_steps,
        "reward": info.reward,
        "termination": info.termination,
        **info.extra(raw, settings),
    }
    return EnvSpec(
        observation_space=observation,
        action_space=action,
        metadata=metadata,
        metrics=dict(info.metrics),
        max_steps=max_steps,
    )


def _public(obs: Any) -> Any:
    """Arrays stay numpy arrays, discrete states become int, tuples become lists."""
    value = spaces.plain(obs)
    return list(value) if isinstance(value, tuple) else value


class GymnasiumEpisode:
    """One fresh Gymnasium environment, seeded once at reset."""

    def __init__(
        self, config: _Config, spec: EnvSpec, validator: spaces.Validator, seed: int
    ) -> None:
        self.spec = spec
        self._info = config.info
        self._validate = validator
        self._seed = int(seed)
        self._env: Any = config.make()
        self._tally = Tally()
        self._started = False
        self._closed = False

    def reset(self) -> Any:
        if self._closed:
            raise AdapterError("this episode is closed; make a new one")
        obs, _ = self._env.reset(seed=self._seed)
        self._env.action_space.seed(self._seed)
        self._tally = Tally()
        self._started = True
        return _public(obs)

    def step(self, action: Any) -> Step:
        if not self._started or self._closed:
            raise AdapterError("step() needs a reset() first (and an open episode)")
        tally = self._tally
        if tally.terminated or tally.truncated:
            raise AdapterError("the episode is over; make a new episode for the next one")
        env_action = self._validate(action)  # raises InvalidAction, never clips
        obs, reward, terminated, truncated, _ = self._env.step(env_action)
        obs, reward = _public(obs), float(reward)
        tally.steps += 1
        tally.terminated, tally.truncated = bool(terminated), bool(truncated)
        tally.last_reward = reward
        for name, hit in self._info.counters.items():
            if hit(obs, reward):
                tally.counts[name] = tally.counts.get(name, 0) + 1
        return Step(obs, reward, tally.terminated, tally.truncated)

    def metrics(self) -> dict[str, float]:
        return {k: float(v) for k, v in self._info.outcome(self._tally).items()}

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._env.close()


def make_adapter() -> GymnasiumAdapter:
    return GymnasiumAdapter()
