"""Every environment family whose extra is installed, through the real harness.

Per family (its first task, in the default run): ``check-adapter`` passes, which
includes the same trajectory from the same seed in a fresh interpreter (determinism
across processes, and in a reused environment where the family reuses them); the
shared baseline evaluates a short episode through real policy processes. Under the
``exhaustive`` marker, every installed task's baseline evaluates a short episode.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from evopolicy_mcp.adapters.conformance import check_adapter, render
from evopolicy_mcp.adapters.gym import GymAdapter
from evopolicy_mcp.adapters.protocol import load_adapter
from evopolicy_mcp.evaluation.snapshot import capture
from evopolicy_mcp.tasks.model import Task
from tests.support.kernel import Kernel
from tests.support.tasks import installed_tasks, sample_tasks

SHORT = 40  # steps of an episode here: enough to exercise every space, cheap for slow ones


def short(task: Task) -> Task:
    """``task`` with its episodes cut at SHORT steps."""
    parameters = {**task.parameters, "max_episode_steps": SHORT}
    return task.model_copy(update={"parameters": parameters})


@pytest.mark.parametrize("task", sample_tasks(), ids=lambda t: t.family)
def test_check_adapter_passes_for_a_task_of_every_family(task: Task) -> None:
    checks = check_adapter(task.adapter, task.parameters, steps=60)
    assert all(c.ok for c in checks), render(checks)


def baseline_evaluates(kernel: Kernel, task: Task, tmp_path: Path) -> None:
    if not isinstance(load_adapter(task.adapter), GymAdapter):
        pytest.skip(f"{task.adapter} has no step limit parameter; its own tests evaluate it")
    program = capture(task.baseline_dir, tmp_path)
    feedback = kernel.evaluate(program, short(task), 1, workers=None)
    summary = feedback.episodes[0]
    assert feedback.failures == {}, summary.message
    assert summary.status == "ok" and 0 < summary.steps <= SHORT
    assert feedback.score is not None and math.isfinite(feedback.score)
    assert feedback.score_metric == task.score.metric


@pytest.mark.parametrize("task", sample_tasks(), ids=lambda t: t.family)
def test_the_baseline_of_every_family_evaluates_a_short_episode(
    kernel: Kernel, task: Task, tmp_path: Path
) -> None:
    baseline_evaluates(kernel, task, tmp_path)


@pytest.mark.exhaustive
@pytest.mark.parametrize("task", installed_tasks(), ids=lambda t: t.id)
def test_the_baseline_of_every_installed_task_evaluates_a_short_episode(
    kernel: Kernel, task: Task, tmp_path: Path
) -> None:
    baseline_evaluates(kernel, task, tmp_path)
