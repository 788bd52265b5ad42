from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.gym import GymAdapter
from evopolicy_mcp.adapters.protocol import AdapterError, InvalidAction, Step, load_adapter
from evopolicy_mcp.environments.gymnasium_adapter import make_adapter
from evopolicy_mcp.tasks.model import load_tasks

TASKS = {t.id: t for t in load_tasks().values() if t.adapter == "gymnasium"}
ADAPTER = make_adapter()


def rollout(parameters: dict[str, Any], seed: int, steps: int = 300) -> list[Any]:
    spec = ADAPTER.spec(parameters)
    rng = random.Random(seed)
    episode = ADAPTER.make_episode(parameters, seed)
    record: list[Any] = [episode.reset()]
    for _ in range(steps):
        step = episode.step(spaces.sample_action(spec.action_space, rng))
        record.append((step.observation, step.reward, step.terminated, step.truncated))
        if step.terminated or step.truncated:
            break
    record.append(episode.metrics())
    episode.close()
    return record


def same(a: Any, b: Any) -> bool:
    return json.dumps(a, default=lambda x: x.tolist()) == json.dumps(
        b, default=lambda x: x.tolist()
    )


def test_every_shipped_gymnasium_task_is_covered() -> None:
    assert set(TASKS) >= {
        "cartpole",
        "acrobot",
        "mountaincar",
        "mountaincar-continuous",
        "pendulum",
        "frozenlake",
        "frozenlake-8x8",
        "taxi",
        "cliffwalking",
        "blackjack",
    }


def test_adapter_loads_through_its_entry_point() -> None:
    adapter = load_adapter("gymnasium")
    assert isinstance(adapter, GymAdapter)
    assert adapter.example_parameters == {"env_id": "CartPole-v1"}


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_spec_describes_spaces_with_names_and_meanings(task_id: str) -> None:
    spec = ADAPTER.spec(TASKS[task_id].parameters)
    json.dumps([spec.observation_space, spec.action_space, spec.metadata], allow_nan=False)
    obs, act = spec.observation_space, spec.action_space
    if obs["type"] == "box":
        assert all(c["name"] and c["description"] for c in obs["components"])
    elif obs["type"] == "tuple":
        assert all(part["description"] for part in obs["spaces"])
    else:
        assert len(obs["description"]) > 40
    if act["type"] == "discrete":
        assert len(act["meanings"]) == act["n"]
    else:
        assert [c["name"] for c in act["components"]]
    assert spec.metadata["env_id"] == TASKS[task_id].parameters["env_id"]
    assert spec.metadata["reward"] and spec.metadata["termination"]
    assert spec.metrics and all(spec.metrics.values())


def test_spec_texts_carry_what_a_controller_needs() -> None:
    cartpole = ADAPTER.spec({"env_id": "CartPole-v1"})
    names = [c["name"] for c in cartpole.observation_space["components"]]
    assert names == ["cart_position", "cart_velocity", "pole_angle", "pole_angular_velocity"]
    assert "0.2094" in cartpole.observation_space["components"][2]["description"]
    assert cartpole.max_steps == 500
    pendulum = ADAPTER.spec({"env_id": "Pendulum-v1"})
    assert (pendulum.action_space["low"], pendulum.action_space["high"]) == (-2.0, 2.0)
    lake = ADAPTER.spec({"env_id": "FrozenLake-v1", "kwargs": {"map_name": "8x8"}})
    assert (
        lake.metadata["map"][0] == "SFFFFFFF"
        and "row * 8 + col" in lake.observation_space["description"]
    )
    assert lake.action_space["meanings"] == ["move left", "move down", "move right", "move up"]
    taxi = ADAPTER.spec({"env_id": "Taxi-v3"})
    assert (
        "((taxi_row * 5 + taxi_col) * 5 + passenger_location) * 4"
        in taxi.observation_space["description"]
    )
    assert (
        ADAPTER.spec({"env_id": "MountainCar-v0"})
        .observation_space["components"][0]["description"]
        .endswith("0.5")
    )


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_same_seed_and_actions_replay_the_same_episode(task_id: str) -> None:
    parameters = TASKS[task_id].parameters
    first = rollout(parameters, 11)
    assert same(first, rollout(parameters, 11))
    assert len(first) >= 3


def test_different_seeds_give_different_start_states() -> None:
    starts = {
        json.dumps(rollout({"env_id": "CartPole-v1"}, s, steps=0)[0].tolist()) for s in range(5)
    }
    assert len(starts) == 5


def test_episode_seeds_may_be_any_u64() -> None:
    episode = ADAPTER.make_episode({"env_id": "Taxi-v3"}, 2**64 - 1)
    assert isinstance(episode.reset(), int)
    episode.close()


def started(parameters: dict[str, Any], seed: int = 3) -> Any:
    episode = ADAPTER.make_episode(parameters, seed)
    episode.reset()
    return episode


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_invalid_actions_are_rejected_for_every_task(task_id: str) -> None:
    parameters = TASKS[task_id].parameters
    space = ADAPTER.spec(parameters).action_space
    episode = started(parameters)
    for bad in spaces.invalid_actions(space):
        with pytest.raises(InvalidAction):
            episode.step(bad)
    # Rejected actions leave the episode usable.
    assert isinstance(episode.step(spaces.sample_action(space, random.Random(0))), Step)
    episode.close()


@pytest.mark.parametrize("bad", [True, 1.0, "1", -1, 2, np.float64(1.0), None])
def test_cartpole_rejects_bools_floats_and_out_of_range_ints(bad: Any) -> None:
    episode = started({"env_id": "CartPole-v1"})
    with pytest.raises(InvalidAction, match=r"expected an int in \[0, 1\]"):
        episode.step(bad)


def test_numpy_integers_are_accepted_for_discrete_actions() -> None:
    episode = started({"env_id": "FrozenLake-v1"})
    step = episode.step(np.int64(1))
    assert type(step.observation) is int and type(step.reward) is float


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ([2.0001], "above high 2"),
        ([-3.0], "below low -2"),
        ([math.nan], "not finite"),
        (1.0, "expected a list of shape"),
        ([1.0, 1.0], "length 1"),
        (np.zeros((1, 1)), "expected shape"),
        ([True], "expected a number"),
    ],
)
def test_pendulum_torque_is_never_clipped(bad: Any, message: str) -> None:
    episode = started({"env_id": "Pendulum-v1"})
    with pytest.raises(InvalidAction, match=message):
        episode.step(bad)


def test_continuous_actions_accept_lists_and_numpy_arrays() -> None:
    episode = started({"env_id": "MountainCarContinuous-v0"})
    for action in ([1.0], (-1,), np.array([0.5], dtype=np.float32), np.array([0.25])):
        obs = episode.step(action).observation
        assert isinstance(obs, np.ndarray) and obs.dtype == np.float32 and obs.shape == (2,)


def test_frozenlake_success_metric_follows_reaching_the_goal() -> None:
    parameters = {"env_id": "FrozenLake-v1", "kwargs": {"is_slippery": False}}
    episode = started(parameters)
    assert episode.metrics() == {"success": 0.0, "hole": 0.0}
    for action in (1, 1, 2, 1, 2, 2):  # down, down, right, down, right, right
        step = episode.step(action)
    assert step.terminated and step.reward == 1.0
    assert episode.metrics() == {"success": 1.0, "hole": 0.0}
    with pytest.raises(AdapterError, match="over"):
        episode.step(0)


def taxi_state(state: int) -> tuple[int, int, int, int]:
    """(taxi_row, taxi_col, passenger_location, destination) from the public encoding."""
    rest, destination = divmod(state, 4)
    rest, passenger = divmod(rest, 5)
    row, col = divmod(rest, 5)
    return row, col, passenger, destination


def test_taxi_counts_illegal_actions() -> None:
    episode = ADAPTER.make_episode({"env_id": "Taxi-v3"}, 3)
    start = episode.reset()
    assert taxi_state(start)[2] != 4  # the passenger waits at a pad
    for _ in range(3):  # dropping off with nobody aboard is illegal
        step = episode.step(5)
        assert step.reward == -10.0 and step.observation == start
    assert episode.metrics() == {"success": 0.0, "illegal_actions": 3.0}


def test_cliffwalking_gets_a_time_limit_and_counts_falls() -> None:
    parameters = {"env_id": "CliffWalking-v1"}
    assert ADAPTER.spec(parameters).max_steps == 200
    assert ADAPTER.spec({**parameters, "max_episode_steps": 50}).max_steps == 50
    episode = started(parameters)
    step = episode.step(1)  # right from the start cell is the cliff
    assert step.reward == -100.0 and step.observation == 36
    assert episode.metrics() == {"success": 0.0, "cliff_falls": 1.0}


def test_blackjack_observation_is_a_list_of_ints_and_outcome_is_reported() -> None:
    episode = ADAPTER.make_episode({"env_id": "Blackjack-v1"}, 5)
    obs = episode.reset()
    assert isinstance(obs, list) and [type(x) for x in obs] == [int, int, int]
    step = episode.step(0)  # stick: the hand ends
    assert step.terminated
    outcome = episode.metrics()
    assert sum(outcome.values()) == 1.0
    assert outcome["win" if step.reward > 0 else "loss" if step.reward < 0 else "draw"] == 1.0


def test_cartpole_success_means_surviving_to_the_limit() -> None:
    parameters = {"env_id": "CartPole-v1", "max_episode_steps": 5}
    episode = ADAPTER.make_episode(parameters, 0)
    obs = episode.reset()
    for _ in range(5):
        step = episode.step(int(obs[2] > 0))  # push towards the side the pole leans to
        obs = step.observation
    assert step.truncated and not step.terminated
    assert episode.metrics() == {"success": 1.0}


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({}, "env_id is missing"),
        ({"env_id": "Nope-v0"}, "cannot make Nope-v0: Environment `Nope` doesn't exist"),
        (
            {"env_id": "Toy/Spaces-v0", "package": "tests.support.toy_env", "kwargs": {"bogus": 1}},
            "cannot make Toy/Spaces-v0: .*bogus",
        ),
        ({"env_id": "CartPole-v1", "package": "no_such_package"}, "cannot be imported"),
        ({"env_id": "CartPole-v1", "package": "os; rm"}, "must be a module name"),
        ({"env_id": "CartPole-v1", "map_name": "4x4"}, "unknown gymnasium parameter"),
        ({"env_id": "FrozenLake-v1", "kwargs": {"map_name": "5x5"}}, r"one of \['4x4', '8x8'\]"),
        ({"env_id": "FrozenLake-v1", "kwargs": {"is_slippery": "yes"}}, "true or false"),
        ({"env_id": "Pendulum-v1", "kwargs": {"g": True}}, "a number"),
        ({"env_id": "Taxi-v3", "kwargs": {"render_mode": "human"}}, "not a constructor argument"),
        ({"env_id": "Taxi-v3", "kwargs": {"max_episode_steps": 9}}, "put it in parameters"),
        ({"env_id": "Taxi-v3", "kwargs": {"map_name": "x"}}, "no constructor argument"),
        ({"env_id": "Taxi-v3", "kwargs": []}, "must be a table"),
        ({"env_id": "Taxi-v3", "max_episode_steps": 0}, "positive integer"),
    ],
)
def test_bad_parameters_raise_a_clear_adapter_error(parameters: dict, message: str) -> None:
    with pytest.raises(AdapterError, match=message):
        ADAPTER.spec(parameters)
    with pytest.raises(AdapterError, match=message):
        ADAPTER.make_episode(parameters, 0)


def test_step_before_reset_and_close_twice_are_handled() -> None:
    episode = ADAPTER.make_episode({"env_id": "CartPole-v1"}, 0)
    with pytest.raises(AdapterError, match="reset"):
        episode.step(0)
    episode.close()
    episode.close()


def test_listing_adapters_and_tasks_imports_no_simulator() -> None:
    code = (
        "import sys\n"
        "from evopolicy_mcp.adapters.protocol import available_adapters\n"
        "from evopolicy_mcp.tasks.model import load_tasks\n"
        "assert 'gymnasium' in available_adapters()\n"
        "assert len(load_tasks()) >= 10\n"
        "import evopolicy_mcp.environments.gymnasium_adapter as m\n"
        "m.make_adapter()\n"
        "from evopolicy_mcp.cli.main import main\n"
        "main(['tasks'])\n"
        "heavy = {'gymnasium', 'mujoco', 'ale_py', 'minigrid', 'highway_env', 'Box2D', 'pygame'}\n"
        "print(sorted(k for k in sys.modules if k.split('.')[0] in heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"
