"""The Ray executor against a real Ray cluster that the test starts on 127.0.0.1 (four CPUs:
two actors for this process, two for an ``evaluate`` that joins it): the same feedback as the thread executor; an actor lost mid-episode is
replaced and its episode runs again; ``evaluate`` joins a cluster by its address."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evopolicy_mcp.evaluation.episodes import evaluate
from evopolicy_mcp.evaluation.executors import private_runtime
from evopolicy_mcp.evaluation.feedback import Feedback
from tests.evaluation.test_processes import MIXED, ROOMY, SLOW_BALANCE, exactly
from tests.support.kernel import FAILS_WHEN_PRIVATE, Kernel, needs, with_parameters

if os.environ.get("EVOPOLICY_REQUIRE_RAY"):
    import ray  # installed for this run: its tests must run
else:
    ray = pytest.importorskip("ray", reason="Ray is not installed here: pip install -e '.[ray]'")

from evopolicy_mcp.evaluation.ray_executor import RayExecutor  # noqa: E402


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A local Ray cluster (head node on 127.0.0.1) for this module; its GCS address."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_AUTH_MODE", "disabled")
        ray.init(
            address="local",  # a new cluster, whatever another one on this machine says
            _node_ip_address="127.0.0.1",
            num_cpus=4,
            include_dashboard=False,
            log_to_driver=False,
        )
        try:
            yield ray.get_runtime_context().gcs_address
        finally:
            ray.shutdown()


@pytest.fixture(scope="module")
def actors(cluster: str) -> Iterator[RayExecutor]:
    with RayExecutor(actors=2) as pool:
        yield pool


def test_ray_actors_give_the_feedback_of_the_thread_executor(
    kernel: Kernel, actors: RayExecutor
) -> None:
    assert actors.actors == 2
    task = with_parameters(ROOMY, max_episode_steps=60).model_copy(update={"trace_episodes": 2})
    program = kernel.program(MIXED)
    jobs = kernel.jobs(task, 6)
    threads = evaluate(program, task, jobs, runner=kernel.runner)
    assert exactly(evaluate(program, task, jobs, executor=actors)) == exactly(threads)
    assert len(set(actors.actor_pids())) == 2


@needs("filesystem", "disk")
def test_hidden_splits_on_ray_actors_run_from_a_private_runtime(
    kernel: Kernel, actors: RayExecutor
) -> None:
    task = with_parameters(ROOMY, max_episode_steps=20)
    program = kernel.program(FAILS_WHEN_PRIVATE)
    jobs = kernel.jobs(task, 2, split="validation")
    assert evaluate(program, task, jobs, executor=actors).policy_failures == 0
    with private_runtime(actors) as hidden:
        assert hidden is not actors
        assert evaluate(program, task, jobs, executor=hidden).policy_failures == 2


def test_an_actor_lost_mid_episode_is_replaced_and_its_episode_run_again(
    kernel: Kernel, actors: RayExecutor
) -> None:
    task = with_parameters(ROOMY, max_episode_steps=60)
    program = kernel.program(SLOW_BALANCE)
    jobs = kernel.jobs(task, 4)
    expected = evaluate(program, task, jobs, runner=kernel.runner)
    before = actors.actor_pids()
    done = threading.Event()
    result: list[Feedback] = []

    def run() -> None:
        result.append(evaluate(program, task, jobs, executor=actors, on_episode=lambda _s: None))
        done.set()

    thread = threading.Thread(target=run)
    thread.start()
    # Each episode takes over a second: kill an actor while the first ones run.
    assert not done.wait(0.6)
    os.kill(before[0], signal.SIGKILL)
    thread.join(120)
    assert result and exactly(result[0]) == exactly(expected)
    assert {e.steps for e in expected.episodes} == {60}
    assert before[0] not in actors.actor_pids()


def test_a_second_executor_on_the_cluster_is_not_held_up_by_the_first_ones_actors(
    kernel: Kernel, actors: RayExecutor
) -> None:
    """A server and its judging processes share one cluster: the first's actors (on
    every CPU) must not keep the second's from starting. Here 2 + 4 actors on 4 CPUs."""
    assert len(actors.actor_pids()) == 2
    task = with_parameters(ROOMY, max_episode_steps=20)
    program = kernel.program(MIXED)
    jobs = kernel.jobs(task, 4)
    with RayExecutor() as second:
        assert second.actors == 4
        assert exactly(evaluate(program, task, jobs, executor=second)) == exactly(
            evaluate(program, task, jobs, runner=kernel.runner)
        )


def test_evaluate_joins_a_cluster_by_its_address(tmp_path: Path, cluster: str) -> None:
    command = [sys.executable, "-m", "evopolicy_mcp", "evaluate", "--task", "cartpole"]
    common = ["--episodes", "3", "--json"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    outputs = []
    for extra in ([], ["--executor", "ray", "--ray-address", cluster, "--workers", "2"]):
        proc = subprocess.run(
            [*command, *common, *extra], capture_output=True, text=True, timeout=240, env=env
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        outputs.append(without_seconds(json.loads(proc.stdout)))
    assert outputs[0] == outputs[1] and outputs[0]["episode_summaries"]


def without_seconds(value: Any) -> Any:
    """A JSON document without its wall-clock times."""
    if isinstance(value, dict):
        return {k: without_seconds(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [without_seconds(v) for v in value]
    return value
