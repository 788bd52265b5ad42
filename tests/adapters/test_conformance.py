from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evopolicy_mcp.adapters.conformance import Check, check_adapter, check_loaded, render
from evopolicy_mcp.adapters.protocol import EnvSpec, InvalidAction, Step
from evopolicy_mcp.tasks.model import load_tasks

# A complete third-party adapter: a 1-D random walk built with the spaces helpers.
RANDOM_WALK = textwrap.dedent(
    '''
    """A 1-D random walk: steer a drifting point back to 0."""

    import numpy as np

    from evopolicy_mcp.adapters import spaces
    from evopolicy_mcp.adapters.protocol import EnvSpec, Step

    ACTION = spaces.box(-1.0, 1.0, (1,), names=["push"], descriptions=["step added to x"])
    OBSERVATION = spaces.box(-np.inf, np.inf, (1,), names=["x"], descriptions=["position"])


    class Walk:
        def __init__(self, seed, horizon):
            self.rng = np.random.default_rng(seed)
            self.horizon = horizon
            self.check = spaces.action_validator(ACTION)
            self.x, self.t = 0.0, 0

        def reset(self):
            self.x, self.t = float(self.rng.normal()), 0
            return np.array([self.x])

        def step(self, action):
            push = float(self.check(action)[0])
            self.x += push + float(self.rng.normal(scale=0.5))
            self.t += 1
            return Step(np.array([self.x]), -abs(self.x), abs(self.x) > 10, self.t >= self.horizon)

        def metrics(self):
            return {"distance": abs(self.x)}

        def close(self):
            pass


    class RandomWalkAdapter:
        name = "randomwalk"
        example_parameters = {"horizon": 30}

        def spec(self, parameters):
            return EnvSpec(
                observation_space=OBSERVATION,
                action_space=ACTION,
                metadata={"horizon": parameters.get("horizon", 30)},
                metrics={"distance": "|x| at the end"},
                max_steps=parameters.get("horizon", 30),
            )

        def make_episode(self, parameters, seed):
            return Walk(seed, parameters.get("horizon", 30))


    def make_adapter():
        return RandomWalkAdapter()
    '''
)

walk = types.ModuleType("random_walk_in_process")
exec(compile(RANDOM_WALK, "random_walk", "exec"), walk.__dict__)


def failed(checks: list[Check]) -> set[str]:
    return {c.name for c in checks if not c.ok}


GYM_PARAMETERS = {
    json.dumps(t.parameters, sort_keys=True): t.parameters
    for t in load_tasks().values()
    if t.adapter == "gymnasium"
}


@pytest.mark.parametrize("parameters", list(GYM_PARAMETERS.values()), ids=list(GYM_PARAMETERS))
def test_gymnasium_adapter_passes_conformance_for_every_task(parameters: dict) -> None:
    checks = check_adapter("gymnasium", parameters)
    assert not failed(checks), render(checks)
    names = [c.name for c in checks]
    assert names[:2] == ["loads", "spec"]
    assert {"deterministic_replay", "invalid_actions", "metrics", "close", "horizon"} <= set(names)


def test_missing_parameters_fall_back_to_the_adapters_example() -> None:
    checks = check_adapter("gymnasium")
    assert not failed(checks), render(checks)
    assert "CartPole-v1" in next(c.detail for c in checks if c.name == "parameters")


def test_unknown_adapter_fails_the_load_check_only() -> None:
    checks = check_adapter("no-such-adapter")
    assert [(c.name, c.ok) for c in checks] == [("loads", False)]
    assert "installed: " in checks[0].detail


def test_bad_parameters_fail_the_spec_check_with_the_adapters_message() -> None:
    checks = check_adapter("gymnasium", {"env_id": "Nope-v0"})
    assert failed(checks) == {"spec"}
    assert "doesn't exist" in checks[-1].detail


def test_the_random_walk_passes_in_process() -> None:
    checks = check_loaded(walk.make_adapter())
    assert not failed(checks), render(checks)


class Unseeded(walk.RandomWalkAdapter):  # type: ignore[name-defined]
    def make_episode(self, parameters: Any, seed: int) -> Any:
        return walk.Walk(None, 30)


class Clipping(walk.RandomWalkAdapter):  # type: ignore[name-defined]
    """Repairs actions instead of rejecting them."""

    def make_episode(self, parameters: Any, seed: int) -> Any:
        episode = walk.Walk(seed, 30)
        inner = episode.check

        def clip(action: Any) -> Any:
            try:
                value = float(np.asarray(action, dtype=float).reshape(-1)[0])
            except (TypeError, ValueError):
                return inner(action)
            return inner([min(max(0.0 if math.isnan(value) else value, -1.0), 1.0)])

        episode.check = clip
        return episode


class WrongError(walk.RandomWalkAdapter):  # type: ignore[name-defined]
    def make_episode(self, parameters: Any, seed: int) -> Any:
        episode = walk.Walk(seed, 30)

        def strict(action: Any) -> Any:
            if not isinstance(action, list | np.ndarray) or len(action) != 1:
                raise ValueError("bad action")
            return walk.spaces.validate_action(walk.ACTION, action)

        episode.check = strict
        return episode


class NumpyScalarObservations(walk.RandomWalkAdapter):  # type: ignore[name-defined]
    """Returns a numpy scalar where a plain float or an array belongs."""

    def make_episode(self, parameters: Any, seed: int) -> Any:
        episode = walk.Walk(seed, 30)
        step = episode.step

        def scalar_step(action: Any) -> Step:
            result = step(action)
            return Step(
                np.float64(result.observation[0]),
                result.reward,
                result.terminated,
                result.truncated,
            )

        episode.step = scalar_step
        return episode


class UndeclaredMetrics(walk.RandomWalkAdapter):  # type: ignore[name-defined]
    def spec(self, parameters: Any) -> EnvSpec:
        base = super().spec(parameters)
        return EnvSpec(
            base.observation_space, base.action_space, base.metadata, {"reach": "?"}, base.max_steps
        )


class EndlessEpisodes(walk.RandomWalkAdapter):  # type: ignore[name-defined]
    def spec(self, parameters: Any) -> EnvSpec:
        base = super().spec(parameters)
        return EnvSpec(base.observation_space, base.action_space, base.metadata, base.metrics, 10)


class CloseOnce(walk.RandomWalkAdapter):  # type: ignore[name-defined]
    def make_episode(self, parameters: Any, seed: int) -> Any:
        episode = walk.Walk(seed, 30)
        state = {"open": True}

        def close() -> None:
            if not state["open"]:
                raise RuntimeError("already closed")
            state["open"] = False

        episode.close = close
        return episode


class InfiniteBounds(walk.RandomWalkAdapter):  # type: ignore[name-defined]
    def spec(self, parameters: Any) -> EnvSpec:
        base = super().spec(parameters)
        space = {**base.observation_space, "low": [-math.inf]}
        return EnvSpec(space, base.action_space, base.metadata, base.metrics, base.max_steps)


class Walled(walk.RandomWalkAdapter):  # type: ignore[name-defined]
    """Forbids pushing outward beyond |x| > 1: an action inside the space that the state
    rules out, which ends the episode as invalid_action."""

    def make_episode(self, parameters: Any, seed: int) -> Any:
        episode = walk.Walk(seed, 30)
        inner = episode.check

        def walls(action: Any) -> Any:
            push = inner(action)
            if abs(episode.x) > 1 and float(push[0]) * episode.x > 0:
                raise InvalidAction(f"x = {episode.x:.3f}: pushing outward is forbidden")
            return push

        episode.check = walls
        return episode


class MovingWalls(walk.RandomWalkAdapter):  # type: ignore[name-defined]
    """Forbids an action depending on unseeded randomness: replays end differently."""

    def make_episode(self, parameters: Any, seed: int) -> Any:
        episode = walk.Walk(seed, 30)
        inner, rng = episode.check, np.random.default_rng()

        def walls(action: Any) -> Any:
            if episode.t >= 1 and rng.random() < 0.3:  # never the first step
                raise InvalidAction(f"a wall moved to {rng.random():.9f}")
            return inner(action)

        episode.check = walls
        return episode


def test_actions_the_state_forbids_end_sampled_episodes_without_failing_a_check() -> None:
    checks = check_loaded(Walled())
    assert not failed(checks), render(checks)
    replay = next(c.detail for c in checks if c.name == "deterministic_replay")
    assert "ended after" in replay and "on an action the state forbids" in replay


@pytest.mark.parametrize(
    ("adapter", "check"),
    [
        (MovingWalls, "deterministic_replay"),
        (Unseeded, "deterministic_replay"),
        (Clipping, "invalid_actions"),
        (WrongError, "invalid_actions"),
        (NumpyScalarObservations, "observation_and_step_types"),
        (UndeclaredMetrics, "metrics"),
        (EndlessEpisodes, "horizon"),
        (CloseOnce, "close"),
        (InfiniteBounds, "spec"),
    ],
)
def test_a_broken_adapter_fails_the_relevant_check(adapter: type, check: str) -> None:
    checks = check_loaded(adapter())
    assert failed(checks) == {check}, render(checks)


def test_clipping_is_reported_as_accepted_actions() -> None:
    detail = next(c.detail for c in check_loaded(Clipping()) if c.name == "invalid_actions")
    assert "was accepted" in detail
    detail = next(c.detail for c in check_loaded(WrongError()) if c.name == "invalid_actions")
    assert "ValueError" in detail and "instead of InvalidAction" in detail


def test_a_third_party_adapter_is_discovered_through_a_real_entry_point(tmp_path: Path) -> None:
    (tmp_path / "thirdparty_env.py").write_text(RANDOM_WALK)
    info = tmp_path / "thirdparty_env-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty-env\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[evopolicy_mcp.environments]\nrandomwalk = thirdparty_env:make_adapter\n"
    )
    code = textwrap.dedent(
        """
        import sys
        from evopolicy_mcp.adapters.protocol import available_adapters, load_adapter
        from evopolicy_mcp.adapters.conformance import check_adapter, render
        names = available_adapters()
        assert "randomwalk" in names and "gymnasium" in names, names
        assert "thirdparty_env" not in sys.modules  # listing imports nothing
        adapter = load_adapter("randomwalk")
        assert type(adapter).__module__ == "thirdparty_env"
        checks = check_adapter("randomwalk", {"horizon": 20})
        print(render(checks))
        sys.exit(0 if all(c.ok for c in checks) else 1)
        """
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    }
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS deterministic_replay" in result.stdout
    assert "ended after 20 steps" in result.stdout
