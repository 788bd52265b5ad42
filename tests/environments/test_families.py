"""The environment families on the kit: Box2D, MuJoCo, MiniGrid and BabyAI, HighwayEnv,
Atari. For each installed family: check-adapter passes, its baseline evaluates one
short episode through the harness, a traced episode gets a bounded replay, and its
observations reach the policy process intact. Every task of every family runs under
``pytest -m exhaustive``."""

from __future__ import annotations

import io

import pytest

from evopolicy_mcp.adapters import replay
from evopolicy_mcp.adapters.conformance import check_adapter
from evopolicy_mcp.adapters.gym import GymAdapter
from evopolicy_mcp.adapters.protocol import load_adapter
from evopolicy_mcp.evaluation.episodes import evaluate
from evopolicy_mcp.evaluation.snapshot import capture
from evopolicy_mcp.tasks.model import Task, load_catalog, unavailable
from tests.support.kernel import Kernel
from tests.support.tasks import installed_tasks

CATALOG = load_catalog()
FAMILIES = {
    "box2d": "box2d",
    "mujoco": "mujoco",
    "minigrid": "minigrid",
    "babyai": "minigrid",
    "highway": "highway",
    "atari": "atari",
}
SHORT = 60  # steps of an episode in these tests


def first_task(family: str) -> Task:
    task = next(t for t in CATALOG.tasks.values() if t.family == family)
    if unavailable(task):
        pytest.skip(unavailable(task))
    return task


def shortened(task: Task, steps: int = SHORT) -> Task:
    """``task`` with episodes cut to ``steps`` where its adapter takes a step limit."""
    if not isinstance(load_adapter(task.adapter), GymAdapter):
        return task
    limit = task.parameters.get("max_episode_steps")
    steps = min(steps, limit) if isinstance(limit, int) else steps
    return task.model_copy(update={"parameters": {**task.parameters, "max_episode_steps": steps}})


def test_the_families_list_at_least_120_tasks_each_with_its_family_and_extra() -> None:
    families = {t.family for t in CATALOG.tasks.values()}
    assert set(FAMILIES) <= families
    grown = [t for t in CATALOG.tasks.values() if t.family in FAMILIES]
    assert len(grown) >= 120
    for task in grown:
        assert task.extra == FAMILIES[task.family] and task.id.startswith(f"{task.family}/")
    counts = {f: sum(t.family == f for t in grown) for f in FAMILIES}
    assert counts["mujoco"] == 11 and counts["box2d"] == 6
    assert counts["atari"] == 2 * 104 and counts["babyai"] >= 40 and counts["minigrid"] >= 60
    assert "minigrid/doorkey-8x8" in CATALOG.tasks and "babyai/gotolocal" in CATALOG.tasks
    assert "mujoco/halfcheetah" in CATALOG.tasks and "atari/pong-ram" in CATALOG.tasks


@pytest.mark.parametrize("adapter", sorted(set(FAMILIES.values())))
def test_check_adapter_passes_for_every_installed_family(adapter: str) -> None:
    first_task(next(f for f, a in FAMILIES.items() if a == adapter))  # skips when missing
    checks = check_adapter(adapter, steps=40)
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]
    assert {"deterministic_across_processes", "artifacts"} <= {c.name for c in checks}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_family_baseline_evaluates_a_short_episode_with_a_bounded_replay(
    family: str, kernel: Kernel
) -> None:
    from PIL import Image

    task = shortened(first_task(family))
    saved: dict[str, bytes] = {}
    program = capture(task.baseline_dir, kernel.store)
    feedback = evaluate(
        program,
        task,
        kernel.jobs(task, 1),
        runner=kernel.runner,
        artifacts=lambda index, name, data: saved.__setitem__(name, data),
    )
    episode = feedback.episodes[0]
    assert episode.status == "ok" and 0 < episode.steps <= SHORT, episode
    assert set(saved) == {"replay.gif"}, (saved.keys(), episode.report)
    gif = Image.open(io.BytesIO(saved["replay.gif"]))
    assert max(gif.size) <= replay.MAX_SIDE and len(saved["replay.gif"]) <= replay.GIF_BYTES
    assert 1 <= gif.n_frames <= replay.GIF_FRAMES + replay.LAST_FRAMES + 2  # equal frames merge
    assert feedback.traces[0].artifacts == ["replay.gif"]
    hidden = evaluate(
        program,
        task,
        kernel.jobs(task, 1, split="validation"),
        runner=kernel.runner,
        traces=False,
        artifacts=lambda *a: saved.clear(),
    )
    assert hidden.traces == [] and saved  # no replay for hidden splits


PROBE = """
import numpy as np

def make_policy(context):
    return Probe(context)

class Probe:
    def __init__(self, context):
        self.space = context.observation_space
        actions = context.action_space
        if actions["type"] == "discrete":
            self.action = actions.get("noop", 0)
        else:
            self.action = [0.0] * actions["shape"][0]

    def act(self, observation):
        {check}
        return self.action
"""


@pytest.mark.parametrize(
    ("family", "check"),
    [
        (
            "minigrid",
            "assert isinstance(observation['mission'], str) and observation['mission'], observation\n"
            "        assert observation['image'].dtype == np.uint8 and observation['image'].shape == (7, 7, 3)\n"
            "        assert observation['direction'] in (0, 1, 2, 3)",
        ),
        (
            "babyai",
            "assert isinstance(observation['mission'], str) and len(observation['mission']) > 5",
        ),
        (
            "atari",
            "assert observation.dtype == np.uint8 and observation.shape[1:] == (160, 3), observation.shape",
        ),
        (
            "mujoco",
            "assert observation.dtype == np.float64 and observation.shape == tuple(self.space['shape'])",
        ),
    ],
)
def test_observations_reach_the_policy_as_arrays_and_text(
    family: str, check: str, kernel: Kernel
) -> None:
    task = shortened(first_task(family), 20)
    source = PROBE.format(check=check)
    episode = kernel.only(source, task)
    assert episode.status == "ok", (episode.failure, episode.message, episode.traceback)


def test_the_noop_baseline_runs_where_the_action_space_names_one(kernel: Kernel) -> None:
    task = shortened(first_task("atari"), 30).model_copy(update={"baseline": "noop"})
    program = capture(task.baseline_dir, kernel.store)
    feedback = evaluate(program, task, kernel.jobs(task, 1), runner=kernel.runner)
    assert feedback.episodes[0].status == "ok"
    assert feedback.episodes[0].steps == 30


@pytest.mark.exhaustive
@pytest.mark.parametrize("task", installed_tasks(), ids=lambda t: t.id)
def test_every_installed_task_baseline_evaluates_through_the_harness(
    task: Task, kernel: Kernel
) -> None:
    short = shortened(task, 200).model_copy(update={"trace_episodes": 0})
    program = capture(short.baseline_dir, kernel.store)
    feedback = evaluate(program, short, kernel.jobs(short, 1), runner=kernel.runner)
    episode = feedback.episodes[0]
    assert episode.status == "ok", (episode.failure, episode.message, episode.traceback)
