"""robosuite on the kit: a fixed observation space, seeded placements, named entries."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("robosuite", reason="the [robosuite] extra is not installed")

from evopolicy_mcp.adapters.protocol import load_adapter  # noqa: E402
from evopolicy_mcp.environments.robosuite.adapter import ROBOT, TASKS, describe_key  # noqa: E402

ROBOSUITE = load_adapter("robosuite")


def test_the_adapter_knows_the_single_arm_tasks() -> None:
    from evopolicy_mcp.environments.robosuite.env import SINGLE_ARM

    assert TASKS == SINGLE_ARM


def test_a_task_whose_object_changes_per_episode_keeps_one_space() -> None:
    parameters = {"env_id": "robosuite/PickPlaceSingle-v0"}
    spec = ROBOSUITE.spec(parameters)
    keys = set(spec.observation_space["spaces"])
    assert {f"{o}_pos" for o in ("Milk", "Bread", "Cereal", "Can")} <= keys
    chosen = set()
    for seed in range(6):
        episode = ROBOSUITE.make_episode(parameters, seed)
        obs = episode.reset()
        episode.close()
        assert set(obs) == keys
        in_play = [o for o in ("Milk", "Bread", "Cereal", "Can") if np.any(obs[f"{o}_pos"])]
        assert len(in_play) == 1
        chosen.add(in_play[0])
    assert len(chosen) > 1  # the seed picks the object
    texts = {k: p["description"] for k, p in spec.observation_space["spaces"].items()}
    assert all(texts[k] == ROBOT[k] for k in ROBOT)
    assert texts["Milk_to_robot0_eef_pos"] == "Milk's position in the end effector's frame (metres)"
    assert all(t != k.replace("_", " ") for k, t in texts.items())  # none left unexplained
    assert describe_key("cubeA_to_cubeB") == "vector from cubeA to cubeB (metres)"
    assert spec.max_steps == 500
    assert [c["name"] for c in spec.action_space["components"]][-1] == "gripper"
