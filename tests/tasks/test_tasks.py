from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

from evopolicy_mcp.adapters.protocol import load_adapter
from evopolicy_mcp.policy import PolicyContext
from evopolicy_mcp.tasks.model import (
    BUILTIN_TASKS_DIR,
    SHARED_BASELINES,
    Task,
    TaskError,
    get_task,
    load_file,
    load_task_file,
    load_tasks,
)
from tests.support.tasks import installed_tasks, sample_tasks

BASELINE_STEPS = 600  # enough for every shipped classic episode; others are cut here
# The single-task files (family files hold many: see test_families.py).
SHIPPED = sorted(p for p in BUILTIN_TASKS_DIR.glob("*.toml") if load_file(p)[0] is None)
EXPECTED_IDS = {
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
    "crafter",
    "crafter-survival",
    "crafter-pixels",
}

MINIMAL = """
id = "{id}"
title = "{title}"
summary = "one line"
description = "for the agent"
adapter = "gymnasium"
baseline = "baselines/x"
{extra_top}
[parameters]
env_id = "CartPole-v1"

[score]
metric = "return"
failure_value = 0.0

[budget]
episodes = 10
submissions = 2
per_submission = {per_submission}
pool = 10
{extra_budget}
[validation]
episodes = 5
candidates = 2

[assessment]
episodes = 5
"""


def write_task(directory: Path, name: str = "t.toml", **fields: object) -> Path:
    values: dict[str, object] = {
        "id": "demo",
        "title": "Demo",
        "extra_top": "",
        "extra_budget": "",
        "per_submission": 5,
    }
    values.update(fields)
    path = directory / name
    path.write_text(MINIMAL.format(**values))
    return path


def test_every_shipped_task_file_loads_with_the_expected_ids() -> None:
    tasks = [load_task_file(path) for path in SHIPPED]
    assert {t.id for t in tasks} == EXPECTED_IDS
    for path, task in zip(SHIPPED, tasks, strict=True):
        assert path.stem == task.id
        assert task.summary and "\n" not in task.summary
        assert len(task.description) > 300
        assert task.baseline in (*SHARED_BASELINES, f"baselines/{task.id}")


def test_cartpole_is_scored_by_mean_return_up_to_500() -> None:
    task = get_task("cartpole")
    assert task.parameters == {"env_id": "CartPole-v1"}
    assert (task.score.metric, task.score.aggregate, task.score.direction) == (
        "return",
        "mean",
        "maximize",
    )
    assert (task.budget.episodes, task.budget.submissions, task.budget.per_submission) == (
        200,
        20,
        50,
    )
    assert task.budget.pool == 100
    assert load_adapter("gymnasium").spec(task.parameters).max_steps == 500


def coherent(task: Task) -> None:
    spec = load_adapter(task.adapter).spec(task.parameters)
    assert task.score.metric in {"return", "steps", *spec.metrics}
    assert task.score.description and "fail" in task.score.description.lower()
    assert 50 <= task.validation.episodes <= 200
    assert 100 <= task.assessment.episodes <= 500
    assert task.budget.per_submission <= task.budget.pool


@pytest.mark.parametrize("task", sample_tasks(), ids=lambda t: t.id)
def test_a_task_of_every_family_is_coherent_with_its_adapter(task: Task) -> None:
    coherent(task)


@pytest.mark.exhaustive
@pytest.mark.parametrize("task", installed_tasks(), ids=lambda t: t.id)
def test_every_installed_task_is_coherent_with_its_adapter(task: Task) -> None:
    coherent(task)


@pytest.mark.parametrize("task", sample_tasks(), ids=lambda t: t.id)
def test_the_baseline_of_a_task_of_every_family_plays_valid_actions(task: Task) -> None:
    baseline_plays(task)


def test_every_task_names_a_declared_extra_and_says_what_to_install_when_missing() -> None:
    from evopolicy_mcp.tasks.extras import declared_extras

    declared = set(declared_extras() or [])
    for task in load_tasks().values():
        assert task.extra is None or task.extra in declared, task.id
    assert declared >= {"box2d", "mujoco", "minigrid", "highway", "atari", "all"}


def baseline_plays(task: Task) -> None:
    policy_file = task.baseline_dir / "policy.py"
    assert policy_file.is_file(), f"{task.id}: missing {policy_file}"
    tree = ast.parse(policy_file.read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported <= set(sys.stdlib_module_names) | {"numpy"}, imported

    module_spec = importlib.util.spec_from_file_location(
        f"baseline_{task.id.replace('-', '_')}", policy_file
    )
    assert module_spec and module_spec.loader
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    adapter = load_adapter(task.adapter)
    spec = adapter.spec(task.parameters)
    for seed in range(2):
        context = PolicyContext(
            task_id=task.id,
            observation_space=spec.observation_space,
            action_space=spec.action_space,
            parameters=dict(task.parameters),
            metadata=spec.metadata,
            policy_seed=seed,
        )
        policy = module.make_policy(context)
        episode = adapter.make_episode(task.parameters, seed)
        observation, steps = episode.reset(), 0
        while steps < BASELINE_STEPS:  # an invalid action raises InvalidAction: a failure
            step = episode.step(policy.act(observation))
            observation, steps = step.observation, steps + 1
            if step.terminated or step.truncated:
                break
        episode.close()
        assert spec.max_steps is None or steps <= spec.max_steps


def test_unknown_key_is_rejected_naming_the_file_and_the_key(tmp_path: Path) -> None:
    path = write_task(tmp_path, extra_top='colour = "blue"')
    with pytest.raises(TaskError, match=rf"{path}.*unknown key 'colour'"):
        load_task_file(path)
    nested = write_task(tmp_path, "n.toml", extra_budget="episode = 3")
    with pytest.raises(TaskError, match=r"n\.toml: .*unknown key 'budget\.episode'"):
        load_task_file(nested)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"id": "CartPole"}, "id"),
        ({"per_submission": 0}, "budget.per_submission"),
        ({"per_submission": 11}, "cannot exceed"),
        ({"extra_top": "trace_steps = -1"}, "trace_steps"),
    ],
)
def test_bad_values_are_rejected(tmp_path: Path, fields: dict, message: str) -> None:
    path = write_task(tmp_path, **fields)
    with pytest.raises(TaskError, match=message):
        load_task_file(path)


def test_malformed_toml_is_reported_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("id = ")
    with pytest.raises(TaskError, match="broken.toml: not valid TOML"):
        load_task_file(path)


def test_extra_directory_tasks_load_and_override_builtin_ones(tmp_path: Path) -> None:
    write_task(tmp_path, "cartpole.toml", id="cartpole", title="My CartPole")
    write_task(tmp_path, "mine.toml", id="mine", title="Mine")
    tasks = load_tasks([tmp_path])
    assert tasks["cartpole"].title == "My CartPole"
    assert tasks["mine"].source == (tmp_path / "mine.toml").resolve()
    assert set(tasks) >= EXPECTED_IDS
    assert load_tasks()["cartpole"].title != "My CartPole"


def test_evopolicy_tasks_variable_adds_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_task(tmp_path, "cartpole.toml", id="cartpole", title="From the environment")
    monkeypatch.setenv("EVOPOLICY_TASKS", str(tmp_path))
    assert get_task("cartpole").title == "From the environment"


def test_a_missing_requested_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="does not exist"):
        load_tasks([tmp_path / "nowhere"])
    with pytest.raises(TaskError, match="unknown task 'nope'; [0-9]+ tasks in families atari"):
        get_task("nope")
