"""Shared pieces of the contest and puzzle tests: the adapters, baselines, playing an episode."""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from evopolicy_mcp.adapters.conformance import feed_digest
from evopolicy_mcp.adapters.protocol import InvalidAction, load_adapter
from evopolicy_mcp.environments.turns import GameAdapter, Options, TurnEpisode
from evopolicy_mcp.policy import PolicyContext

BASELINES = Path(__file__).resolve().parents[2] / "evopolicy_mcp/tasks/builtin/baselines"


def adapter(family: str) -> GameAdapter:
    found = load_adapter(family)
    assert isinstance(found, GameAdapter)
    return found


def game(family: str, name: str, seed: int = 0, **parameters: Any) -> TurnEpisode:
    """A fresh episode of game ``name`` of ``family`` (adapter ``contests`` or ``puzzles``)."""
    return adapter(family).make_episode({"game": name, **parameters}, seed)


def options(module: ModuleType, **values: Any) -> Options:
    """The module's defaults with ``values`` over them."""
    return Options(**{**{k: p.default for k, p in module.PARAMETERS.items()}, **values})


def baseline(name: str) -> ModuleType:
    """The baseline program ``baselines/NAME/policy.py``, imported in this process."""
    path = BASELINES / name / "policy.py"
    spec = importlib.util.spec_from_file_location(f"baseline_{name.replace('-', '_')}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def play(
    family: str,
    parameters: Mapping[str, Any],
    seed: int,
    act: Callable[[Any], Any] | str,
    limit: int = 1_000_000,
) -> tuple[dict[str, float], str, int]:
    """Play one episode with ``act`` (or the named baseline): its metrics, a digest of every
    observation, action and reward, and the steps. An invalid action propagates."""
    ad = adapter(family)
    if isinstance(act, str):
        spec = ad.spec(parameters)
        context = PolicyContext(
            task_id=f"{family}/{act}",
            observation_space=spec.observation_space,
            action_space=spec.action_space,
            parameters=dict(parameters),
            metadata=spec.metadata,
            policy_seed=seed,
        )
        act = baseline(act).make_policy(context).act
    episode = ad.make_episode(parameters, seed)
    digest = hashlib.sha256()
    obs = episode.reset()
    feed_digest(digest, obs)
    steps = 0
    try:
        while steps < limit:
            action = act(obs)
            step = episode.step(action)
            steps += 1
            obs = step.observation
            for part in (action, obs, step.reward, step.terminated, step.truncated):
                feed_digest(digest, part)
            if step.terminated or step.truncated:
                break
        return episode.metrics(), digest.hexdigest(), steps
    finally:
        episode.close()


__all__ = ["InvalidAction", "adapter", "baseline", "game", "options", "play"]
