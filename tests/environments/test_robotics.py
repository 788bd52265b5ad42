"""Gymnasium-Robotics on the kit: components from each environment's own documentation."""

from __future__ import annotations

import pytest

pytest.importorskip("gymnasium_robotics", reason="the [robotics] extra is not installed")

from evopolicy_mcp.adapters.protocol import load_adapter  # noqa: E402
from evopolicy_mcp.environments.robotics import (  # noqa: E402
    COMPONENTS,
    FETCH_IDS,
    IDS,
    doc_tables,
)

ROBOTICS = load_adapter("robotics")


def described(space: dict) -> bool:
    """Every component has its own words: in components, or (long tables) by index."""
    if space["type"] == "dict":
        return all(described(s) for s in space["spaces"].values())
    if len(space["shape"]) != 1:
        return bool(space.get("description"))
    size = space["shape"][0]
    if size > COMPONENTS:
        return f"[{size - 1}] " in space["description"] and "components" not in space
    return len(space.get("components", [])) == size


@pytest.mark.parametrize("env_id", [*FETCH_IDS, *IDS])
def test_every_component_of_every_shipped_id_is_described(env_id: str) -> None:
    kwargs = {"include_cfrc_ext_in_observation": False} if env_id.startswith("AntMaze") else {}
    spec = ROBOTICS.spec({"env_id": env_id, "kwargs": kwargs})
    assert described(spec.observation_space), env_id
    components = spec.action_space["components"]
    assert all(c["description"] and not c["description"].startswith("-") for c in components)


def test_a_documentation_table_that_does_not_fit_its_space_is_left_out() -> None:
    from gymnasium_robotics.envs.maze.ant_maze_v5 import AntMazeEnv

    assert len(doc_tables(AntMazeEnv)["observation"]) == 27  # documented without contacts
    spec = ROBOTICS.spec({"env_id": "AntMaze_UMaze-v5"})  # 105 with the contact forces
    observation = spec.observation_space["spaces"]["observation"]
    assert observation["shape"] == [105] and "components" not in observation


def test_the_kitchen_counts_completed_sub_tasks() -> None:
    parameters = {"env_id": "FrankaKitchen-v1", "kwargs": {"tasks_to_complete": ["microwave"]}}
    spec = ROBOTICS.spec(parameters)
    assert set(spec.metrics) == {"tasks_completed", "success"}
    episode = ROBOTICS.make_episode(parameters, 0)
    episode.reset()
    episode.step([0.0] * 9)
    assert episode.metrics() == {"tasks_completed": 0.0, "success": 0.0}
    episode.close()
