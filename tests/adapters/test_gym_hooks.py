"""The kit's hooks for simulators that need more than reset(seed=): seeding, following
episodes, own replay files, reusing environments that are slow to build."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from evopolicy_mcp.adapters.gym import GymAdapter, Texts
from evopolicy_mcp.adapters.reuse import Idle
from tests.support.seeded_env import SeededEnv

OWN = {"env_id": "Toy/OwnSeed-v0"}


def _reseed(env: Any, seed: int) -> None:
    env.reseed(seed)


def adapter(**texts: Any) -> GymAdapter:
    return GymAdapter("own", default=Texts(**texts), package="tests.support.seeded_env")


def play(kit: GymAdapter, seed: int, actions: list[int], parameters: Mapping[str, Any] = OWN):
    episode = kit.make_episode(parameters, seed)
    observations = [episode.reset()]
    for action in actions:
        step = episode.step(action)
        observations.append(step.observation)
        if step.terminated or step.truncated:
            break
    return episode, observations


def test_an_environment_whose_reset_seed_does_not_seed_it_replays_only_with_the_seed_hook() -> None:
    plain = adapter()
    first = [play(plain, 5, [1, 2, 0])[1] for _ in range(2)]
    assert not np.array_equal(first[0][0], first[1][0])  # reset(seed=5) twice, two episodes
    hooked = adapter(seed=_reseed)
    runs = [play(hooked, 5, [1, 2, 0])[1] for _ in range(2)]
    assert all(np.array_equal(a, b) for a, b in zip(*runs, strict=True))
    assert not np.array_equal(runs[0][0], play(hooked, 6, [])[1][0])


def test_the_seed_hook_also_seeds_the_replay_so_it_ends_where_the_episode_did() -> None:
    for texts, note in (({}, True), ({"seed": _reseed}, False)):
        episode, _ = play(adapter(**texts), 3, [1] * 10)
        files = episode.artifacts()
        report = episode.report() or {}
        assert files["replay.gif"].startswith(b"GIF8")
        assert ("ended elsewhere" in report.get("replay", "")) is note, report
        episode.close()


class Counting:
    """A watch: counts steps and the reward of action 1, reports the actions seen."""

    def __init__(self, env: Any, settings: Mapping[str, Any]) -> None:
        self.env, self.actions, self.steps, self.gain = env, [], 0, 0.0

    def start(self, observation: Any) -> None:
        self.first = observation

    def step(self, action: Any, observation: Any, reward: float, info: Mapping[str, Any]) -> None:
        self.steps += 1
        self.actions.append(action)
        self.gain += reward if action == 1 else 0.0

    def metrics(self) -> dict[str, float]:
        return {"watched_steps": self.steps, "gain": self.gain}

    def report(self) -> dict[str, Any]:
        return {"actions": self.actions, "env": type(self.env).__name__}


def test_a_watch_follows_every_step_and_adds_metrics_and_a_report() -> None:
    kit = adapter(
        seed=_reseed,
        watch=Counting,
        outcome=lambda t: {"steps": float(t.steps)},
        replay=False,
    )
    episode, observations = play(kit, 1, [1, 0, 2, 1])
    steps = len(observations) - 1
    metrics = episode.metrics()
    assert metrics["watched_steps"] == metrics["steps"] == steps
    assert metrics["gain"] > 0.0
    assert episode.report() == {"actions": [1, 0, 2, 1][:steps], "env": "SeededEnv"}
    # A new reset starts a new watch.
    episode.close()
    again = kit.make_episode(OWN, 1)
    again.reset()
    assert again.metrics()["watched_steps"] == 0.0


def test_a_family_s_record_replaces_the_gif_and_replays_in_a_seeded_environment() -> None:
    seen: dict[str, Any] = {}

    def record(
        make: Any, seed: int, actions: Any, last: Any
    ) -> tuple[dict[str, bytes], str | None]:
        env = make(length=99)  # a replay's own constructor arguments win over the task's
        obs, _ = env.reset(seed=seed)
        for action in actions:
            obs = env.step(action)[0]
        seen.update(length=env.unwrapped.length, same=np.array_equal(obs, last))
        env.close()
        return {"steps.txt": f"{len(actions)} steps".encode()}, "a note"

    kit = adapter(seed=_reseed, record=record)
    parameters = {**OWN, "kwargs": {"length": 4}}
    episode, observations = play(kit, 2, [0, 1, 2, 0, 1], parameters)
    assert episode.artifacts() == {"steps.txt": f"{len(observations) - 1} steps".encode()}
    assert seen == {"length": 99, "same": True}
    assert episode.report() == {"replay": "a note"}


def test_reused_environments_are_taken_back_only_from_clean_episodes() -> None:
    kit = adapter(seed=_reseed, reuse=True)
    parameters = {**OWN, "kwargs": {"fail_on": 2}}
    made = SeededEnv.made
    kit.spec(parameters)
    first, run = play(kit, 7, [1, 0, 1], parameters)
    first.close()
    again, rerun = play(kit, 7, [1, 0, 1], parameters)
    again.close()
    assert SeededEnv.made == made + 1  # the spec's environment served both episodes
    assert all(np.array_equal(a, b) for a, b in zip(run, rerun, strict=True))
    broken = kit.make_episode(parameters, 7)
    broken.reset()
    closed = SeededEnv.closed
    with pytest.raises(RuntimeError, match="broke"):
        broken.step(2)
    broken.close()
    assert SeededEnv.closed == closed + 1  # a simulator that raised is closed, not kept
    fresh = kit.make_episode(parameters, 7)
    assert SeededEnv.made == made + 2
    fresh.close()


def test_idle_environments_are_capped_per_key_and_in_all_and_the_oldest_closed() -> None:
    class Env:
        def __init__(self, name: str) -> None:
            self.name, self.closed = name, False

        def close(self) -> None:
            self.closed = True

    idle = Idle(per_key=2, total=3)
    envs = {n: Env(n) for n in ("a1", "a2", "a3", "b1", "c1")}
    for name, env in envs.items():
        idle.give(name[0], env)
    assert [n for n, e in envs.items() if e.closed] == ["a1", "a2"]  # a3 pushed a1; c1, a2
    assert len(idle) == 3
    assert idle.take("a") is envs["a3"] and idle.take("a") is None
    assert idle.take("b") is envs["b1"]
    idle.clear()
    assert envs["c1"].closed and len(idle) == 0
