"""Task families: one file, many variants; grouping, filtering, shared baselines."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.policy import PolicyContext
from evopolicy_mcp.tasks.model import (
    BUILTIN_TASKS_DIR,
    TaskError,
    get_task,
    load_catalog,
    load_tasks,
)

FAMILY = textwrap.dedent(
    """
    [family]
    id = "lakes"
    title = "Frozen lakes of every size"
    summary = "walk across ice"
    vars = { what = "lake" }

    [defaults]
    title = "${what} ${size}"
    summary = "Cross the ${size} ${what} (${id})"
    description = "Walk across a ${size} ${what}; costs $$0."
    adapter = "gymnasium"
    baseline = "random"
    [defaults.parameters]
    env_id = "FrozenLake-v1"
    kwargs = { map_name = "${size}" }
    [defaults.score]
    metric = "success"
    failure_value = 0.0
    [defaults.budget]
    episodes = 10
    submissions = 2
    per_submission = 5
    pool = 10
    [defaults.validation]
    episodes = 5
    candidates = 2
    [defaults.assessment]
    episodes = 5

    [[variants]]
    id = "small"
    vars = { size = "4x4" }

    [[variants]]
    id = "large"
    vars = { size = "8x8" }
    budget = { episodes = 20 }

    [[modes]]
    suffix = ""

    [[modes]]
    suffix = "-dry"
    parameters = { kwargs = { is_slippery = false } }
    vars = { what = "pond" }
    """
)


def write(directory: Path, text: str, name: str = "lakes.toml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


def test_a_family_file_gives_one_task_per_variant_and_mode(tmp_path: Path) -> None:
    write(tmp_path, FAMILY)
    catalog = load_catalog([tmp_path])
    ids = [t for t in catalog.tasks if t.startswith("lakes/")]
    assert ids == ["lakes/large", "lakes/large-dry", "lakes/small", "lakes/small-dry"]
    large, dry = catalog.tasks["lakes/large"], catalog.tasks["lakes/small-dry"]
    assert (
        large.family == "lakes" and catalog.families["lakes"].title == "Frozen lakes of every size"
    )
    assert large.parameters == {"env_id": "FrozenLake-v1", "kwargs": {"map_name": "8x8"}}
    assert large.budget.episodes == 20 and large.budget.submissions == 2  # merged key by key
    assert dry.parameters["kwargs"] == {"map_name": "4x4", "is_slippery": False}
    assert dry.summary == "Cross the 4x4 pond (lakes/small-dry)"
    assert dry.description == "Walk across a 4x4 pond; costs $0."
    assert large.digest != catalog.tasks["lakes/small"].digest
    assert large.source == (tmp_path / "lakes.toml").resolve()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("${size}", "${colour}"), r"variant 'small': no var 'colour'"),
        (('id = "large"', 'id = "small"'), "two variants make the task id 'lakes/small'"),
        (('id = "lakes"', 'id = "Lakes"'), "family.id must be"),
        (("[[modes]]", "[[mode]]"), "unknown key"),
        (
            ("budget = { episodes = 20 }", "budget = { episodes = 0 }"),
            r"lakes/large\).*budget.episodes",
        ),
    ],
)
def test_a_bad_family_file_names_the_file_and_the_variant(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    path = write(tmp_path, FAMILY.replace(*change, 1))
    with pytest.raises(TaskError, match=message) as caught:
        load_catalog([tmp_path])
    assert str(path) in str(caught.value)


def test_a_family_may_span_files_that_agree_on_it(tmp_path: Path) -> None:
    write(tmp_path, FAMILY)
    ponds = FAMILY.replace('id = "small"', 'id = "tiny"').replace('id = "large"', 'id = "huge"')
    write(tmp_path, ponds, "lakes-more.toml")
    catalog = load_catalog([tmp_path])
    assert {"lakes/small", "lakes/tiny", "lakes/huge-dry"} <= set(catalog.tasks)
    write(
        tmp_path,
        ponds.replace('summary = "walk across ice"', 'summary = "swim"'),
        "lakes-more.toml",
    )
    with pytest.raises(TaskError, match="also declared in lakes-more.toml with another title"):
        load_catalog([tmp_path])


def test_flat_ids_keep_working_beside_family_ids() -> None:
    tasks = load_tasks()
    for flat in ("cartpole", "taxi", "crafter", "blackjack"):
        assert flat in tasks and "/" not in flat
    assert get_task("cartpole").family == "classic-control"
    assert get_task("crafter").family == "crafter"  # the adapter's name when none is given


def run_cli(*args: str, tasks_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
    extra = ["--tasks-dir", str(tasks_dir)] if tasks_dir else []
    return subprocess.run(
        [sys.executable, "-m", "evopolicy_mcp", *args, *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_tasks_are_listed_by_family_and_filtered_with_family(tmp_path: Path) -> None:
    write(tmp_path, FAMILY)
    listed = run_cli("tasks", tasks_dir=tmp_path)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    head = lines.index(next(x for x in lines if x.startswith("lakes (4 tasks)")))
    assert "Frozen lakes of every size" in lines[head]
    assert [x.split()[0] for x in lines[head + 1 : head + 5]] == [
        "lakes/large",
        "lakes/large-dry",
        "lakes/small",
        "lakes/small-dry",
    ]
    only = run_cli("tasks", "--family", "lakes", "--json", tasks_dir=tmp_path)
    rows = json.loads(only.stdout)
    assert {r["family"] for r in rows} == {"lakes"} and len(rows) == 4
    assert all(r["available"] and r["extra"] is None for r in rows)
    bad = run_cli("tasks", "--family", "nope", tasks_dir=tmp_path)
    assert bad.returncode == 2 and "no tasks in family 'nope'; families:" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_family_task_evaluates_by_its_id(tmp_path: Path) -> None:
    write(tmp_path, FAMILY)
    done = run_cli(
        "evaluate", "--task", "lakes/small-dry", "--episodes", "2", "--json", tasks_dir=tmp_path
    )
    assert done.returncode == 0, done.stderr
    feedback = json.loads(done.stdout)
    assert feedback["task_id"] == "lakes/small-dry" and len(feedback["episode_summaries"]) == 2


def load_baseline(name: str) -> Any:
    path = BUILTIN_TASKS_DIR / "baselines" / name / "policy.py"
    spec = importlib.util.spec_from_file_location(f"shared_{name}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SPACES = [
    spaces.discrete(4, start=2),
    spaces.box(-2.0, 2.0, (3,)),
    spaces.box([-1.0, 0.0, 0.0], [1.0, 1.0, 1.0]),
    spaces.box(-float("inf"), float("inf"), (2, 2)),
    spaces.box(0.0, float("inf"), (2,)),
    spaces.box(0, 9, (2, 3), "int64"),
    spaces.multi_discrete([3, 5], [1, -2]),
    spaces.multi_binary([2, 2]),
    spaces.tuple_of(spaces.discrete(2), spaces.box(0.0, 1.0, ())),
    spaces.dict_of({"a": spaces.discrete(3), "b": spaces.multi_binary(2)}),
    spaces.text(5, 1, "xyz"),
    spaces.sequence_of(spaces.discrete(2)),
]


def context(space: dict[str, Any], seed: int) -> PolicyContext:
    return PolicyContext(
        task_id="t",
        observation_space=spaces.discrete(2),
        action_space=space,
        parameters={},
        metadata={},
        policy_seed=seed,
    )


@pytest.mark.parametrize("space", SPACES, ids=lambda s: s["type"])
def test_the_shared_random_baseline_plays_valid_actions_of_every_space(space: dict) -> None:
    module = load_baseline("random")
    check = spaces.action_validator(space)
    actions = []
    for seed in (1, 2):
        policy = module.make_policy(context(space, seed))
        actions.append([json.dumps(check(policy.act(None)), default=str) for _ in range(30)])
    assert actions[0] != actions[1]  # the policy seed drives it
    again = module.make_policy(context(space, 1))
    assert [json.dumps(check(again.act(None)), default=str) for _ in range(30)] == actions[0]


def test_the_shared_noop_baseline_does_nothing_where_the_space_says_how() -> None:
    module = load_baseline("noop")
    assert module.make_policy(context(spaces.discrete(6, noop=0), 1)).act(None) == 0
    box = spaces.box([-1.0, 0.0, 0.0], [1.0, 1.0, 1.0], names=["steer", "gas", "brake"])
    assert module.make_policy(context(box, 1)).act(None) == [0.0, 0.0, 0.0]
    lifted = spaces.box([0.5, -3.0], [1.0, -1.0])
    assert module.make_policy(context(lifted, 1)).act(None) == [0.5, -1.0]
    with pytest.raises(ValueError, match="names no 'noop'"):
        module.make_policy(context(spaces.discrete(3), 1))
    assert spaces.validate_action(box, module.make_policy(context(box, 3)).act(None)).shape == (3,)
