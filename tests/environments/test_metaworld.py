"""Meta-World's 50 tasks: positions drawn from the episode's seed, the success metric."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("metaworld", reason="the [metaworld] extra is not installed")

from evopolicy_mcp.adapters.protocol import load_adapter  # noqa: E402
from evopolicy_mcp.environments.metaworld.adapter import TASKS  # noqa: E402

METAWORLD = load_adapter("metaworld")


def test_the_adapter_knows_meta_world_s_tasks() -> None:
    import metaworld

    assert sorted(TASKS) == sorted(metaworld.ALL_V3_ENVIRONMENTS)


def test_each_seed_draws_its_own_positions_and_the_same_seed_the_same_ones_in_a_reused_env() -> (
    None
):
    parameters = {"env_id": "metaworld/pick-place-v3"}
    METAWORLD.spec(parameters)

    def start(seed: int) -> np.ndarray:
        episode = METAWORLD.make_episode(parameters, seed)
        obs = episode.reset()
        episode.close()  # back to the adapter's idle environments
        return np.concatenate([obs[4:7], obs[36:39]])  # the puck and the goal

    first, second, again = start(1), start(2), start(1)
    assert not np.allclose(first, second)
    assert np.array_equal(first, again)


def test_meta_world_s_scripted_expert_solves_reach_and_the_success_metric_says_so() -> None:
    from metaworld.policies import ENV_POLICY_MAP

    expert = ENV_POLICY_MAP["reach-v3"]()
    episode = METAWORLD.make_episode({"env_id": "metaworld/reach-v3"}, 3)
    obs, steps = episode.reset(), 0
    while True:
        step = episode.step(np.clip(expert.get_action(obs), -1, 1).astype(np.float32))
        obs, steps = step.observation, steps + 1
        if step.terminated or step.truncated:
            break
    metrics = episode.metrics()
    episode.close()
    assert steps == 500
    assert metrics["success"] == 1.0 and metrics["success_steps"] > 100
