"""The DeepMind Control Suite as Gymnasium environments on the kit."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dm_control", reason="the [dmc] extra is not installed")

from evopolicy_mcp.adapters.protocol import load_adapter  # noqa: E402
from evopolicy_mcp.environments.dmc.adapter import BENCHMARKING, DOMAINS  # noqa: E402

DMC = load_adapter("dmc")


def test_the_adapter_knows_the_suite_s_benchmarking_tasks() -> None:
    from dm_control import suite

    assert sorted(BENCHMARKING) == sorted(suite.BENCHMARKING)


@pytest.mark.parametrize("domain", sorted({d for d, _ in BENCHMARKING}))
def test_every_observation_entry_is_explained_and_every_actuator_named(domain: str) -> None:
    task = next(t for d, t in BENCHMARKING if d == domain)
    spec = DMC.spec({"env_id": f"dm_control/{domain}-{task}-v0"})
    parts = spec.observation_space["spaces"]
    assert parts and all(p["description"] == DOMAINS[domain][k] for k, p in parts.items())
    components = spec.action_space["components"]
    assert all(c["low"] == -1.0 and c["high"] == 1.0 for c in components)
    assert not any(c["name"].startswith("actuator_") for c in components)
    assert spec.max_steps == 1000


def test_a_64_bit_seed_reaches_the_suite_whole_and_an_episode_is_truncated_at_1000() -> None:
    import gymnasium

    import evopolicy_mcp.environments.dmc.env  # noqa: F401  (registers the ids)

    env = gymnasium.make("dm_control/cartpole-swingup-v0")
    low = env.reset(seed=5)[0]["position"]
    high = env.reset(seed=5 + (1 << 40))[0]["position"]
    assert not np.array_equal(low, high)  # the high word counts
    assert np.array_equal(env.reset(seed=5)[0]["position"], low)
    steps, truncated, terminated = 0, False, False
    while not (truncated or terminated):
        _, reward, terminated, truncated, _ = env.step(np.zeros(1))
        steps += 1
        assert 0.0 <= reward <= 1.0
    assert (steps, truncated, terminated) == (1000, True, False)
    env.close()
