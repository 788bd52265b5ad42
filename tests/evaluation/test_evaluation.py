"""evaluate(): programs over real Gymnasium episodes, determinism, state, splits and host faults."""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evopolicy_mcp.adapters import protocol as adapters
from evopolicy_mcp.adapters.actions import validate_action
from evopolicy_mcp.adapters.protocol import AdapterError, EnvSpec, InvalidAction, Step, load_adapter
from evopolicy_mcp.evaluation import seeds
from evopolicy_mcp.evaluation.episodes import (
    EvaluationAborted,
    evaluate,
    jobs_for,
)
from evopolicy_mcp.evaluation.feedback import EpisodeSummary
from evopolicy_mcp.evaluation.snapshot import capture
from evopolicy_mcp.kernel import frames
from evopolicy_mcp.runner.template import Failure
from tests.support.kernel import (
    GOOD_CARTPOLE,
    SECRET,
    TASKS,
    Kernel,
    comparable,
    policy_with_act,
    with_limits,
    with_parameters,
)

FAST = with_limits("cartpole", act_seconds=0.3, startup_seconds=2.0, episode_seconds=5.0)


# -- shipped tasks -------------------------------------------------------------


def test_a_good_cartpole_controller_reaches_500_on_twenty_episodes(kernel: Kernel) -> None:
    feedback = kernel.evaluate(GOOD_CARTPOLE, "cartpole", 20, workers=None)
    assert feedback.score == 500.0
    assert feedback.failures == {}
    assert [s.steps for s in feedback.episodes] == [500] * 20
    assert all(s.truncated and not s.terminated for s in feedback.episodes)
    assert feedback.metrics["mean_return"] == 500.0


# The tasks that need no extra; the families' tasks run in tests/environments (a short
# episode per family, every task under the exhaustive marker): three whole episodes of
# each of them would take the default run minutes (a robosuite episode takes 5-15 s).
CORE_TASKS = sorted(t for t, task in TASKS.items() if task.extra is None)


@pytest.mark.parametrize("task_id", CORE_TASKS)
def test_every_shipped_tasks_baseline_runs_without_a_policy_failure(
    kernel: Kernel, task_id: str, tmp_path: Path
) -> None:
    task = TASKS[task_id]
    program = capture(task.baseline_dir, tmp_path)
    feedback = kernel.evaluate(program, task, 3, workers=None)
    assert feedback.failures == {}, [s.message for s in feedback.episodes]
    assert [s.index for s in feedback.episodes] == [0, 1, 2]
    assert all(s.status == "ok" and s.steps > 0 for s in feedback.episodes)
    assert feedback.score is not None and math.isfinite(feedback.score)
    assert feedback.score_metric == task.score.metric
    assert len(feedback.traces) == min(3, task.trace_episodes)


# -- failures stay in their episode ----------------------------------------------

# Misbehaves at its fourth step in every episode whose policy seed says so.
MIXED = policy_with_act(
    """\
    self.steps += 1
    if self.steps == 4:
        mode = self.seed % 5
        if mode == 1:
            raise RuntimeError("planned failure")
        if mode == 2:
            os._exit(9)
        if mode == 3:
            while True:
                pass
        if mode == 4:
            os.write(4, b"not a frame at all")
            time.sleep(5)
    x, x_dot, theta, theta_dot = observation
    return 1 if theta + 0.5 * theta_dot + 0.05 * x + 0.1 * x_dot > 0 else 0
    """,
    top="import os, time",
    init="self.seed = context.policy_seed\nself.steps = 0",
)
EXPECTED = {
    0: None,
    1: Failure.EXCEPTION,
    2: Failure.CRASHED,
    3: Failure.TIMEOUT,
    4: Failure.PROTOCOL_ERROR,
}


# One at a time; several at once on one host thread; more at once than CPUs for them.
WORKERS = [1, 2, 5]


@pytest.mark.parametrize("workers", WORKERS)
def test_a_failure_ends_only_its_episode_and_the_others_run_as_if_alone(
    kernel: Kernel, workers: int
) -> None:
    task = with_parameters(FAST, max_episode_steps=60)
    jobs = kernel.jobs(task, 12)
    modes = [job.policy_seed % 5 for job in jobs]
    assert len(set(modes)) >= 4, "the seeds should mix good and bad episodes"
    mixed = kernel.evaluate(MIXED, task, 12, workers=workers)
    clean = kernel.evaluate(GOOD_CARTPOLE, task, 12, workers=workers)
    for summary, reference, mode in zip(mixed.episodes, clean.episodes, modes, strict=True):
        assert summary.failure == EXPECTED[mode], (mode, summary)
        if EXPECTED[mode] is None:
            assert summary.status == "ok"
            assert (summary.steps, summary.episode_return, summary.metrics) == (
                reference.steps,
                reference.episode_return,
                reference.metrics,
            )
        else:
            assert summary.steps == 3
    failed = sum(EXPECTED[m] is not None for m in modes)
    assert sum(mixed.failures.values()) == failed
    ok_returns = [s.episode_return for s in mixed.episodes if s.status == "ok"]
    assert mixed.score == pytest.approx((sum(ok_returns) + 0.0 * failed) / 12)


def test_failed_episodes_score_the_tasks_failure_value(kernel: Kernel) -> None:
    task = with_limits("pendulum", act_seconds=0.5)
    feedback = kernel.evaluate(policy_with_act("raise ValueError('no')"), task, 2)
    assert feedback.failures == {"exception": 2}
    assert feedback.score == task.score.failure_value == -3300.0
    assert feedback.metrics["failure_rate"] == 1.0


# -- numpy at the policy boundary ----------------------------------------------

CARTPOLE_ACTIONS: Mapping[str, bool] = {
    # Accepted: integers of any numpy width, as scalars.
    "np.int64(choice)": True,
    "np.int32(choice)": True,
    "np.uint8(choice)": True,
    "int(np.argmax([1 - choice, choice]))": True,
    "np.argmax([1 - choice, choice])": True,
    # Rejected: not an int (never rounded, cast or unwrapped).
    "np.array(choice)": False,  # 0-d array
    "np.array([choice])": False,
    "np.bool_(choice)": False,
    "np.float64(choice)": False,
    "float(choice)": False,
    "True": False,
}

PENDULUM_ACTIONS: Mapping[str, bool] = {
    "np.array([torque], dtype=np.float32)": True,
    "np.array([torque], dtype=np.float64)": True,
    "np.array([torque], dtype=np.float16)": True,
    "[np.float32(torque)]": True,
    "(torque,)": True,
    "np.array([1])": True,  # an integer array in a float box holds a valid torque
    "np.float32(torque)": False,  # a bare number where a list of one belongs
    "np.array(torque)": False,
    "np.array([[torque]])": False,
    "np.array([torque, torque])": False,
    "np.array([np.nan], dtype=np.float32)": False,
    "np.array([3.0], dtype=np.float32)": False,
}


def numpy_policy(expression: str) -> str:
    return policy_with_act(
        f"""\
        choice = 1 if observation[-1] > 0 else 0
        torque = float(np.clip(-observation[-1], -2, 2))
        return {expression}
        """,
        top="import numpy as np",
    )


def boundary_verdict(task_id: str, expression: str) -> bool:
    """Whether the adapter's validator takes the value as it arrives through the frame codec."""
    value = eval(expression, {"np": np}, {"choice": 1, "torque": 0.5})
    try:
        arrived = frames.decode(frames.encode(value))
    except frames.FrameError:
        return False
    space = load_adapter("gymnasium").spec(TASKS[task_id].parameters).action_space
    try:
        validate_action(space, arrived)
    except InvalidAction:
        return False
    return True


@pytest.mark.parametrize(
    ("task_id", "expression", "accepted"),
    [("cartpole", e, ok) for e, ok in CARTPOLE_ACTIONS.items()]
    + [("pendulum", e, ok) for e, ok in PENDULUM_ACTIONS.items()],
)
def test_numpy_actions_are_judged_as_the_adapter_judges_them(
    kernel: Kernel, task_id: str, expression: str, accepted: bool
) -> None:
    assert boundary_verdict(task_id, expression) == accepted
    summary = kernel.only(numpy_policy(expression), with_limits(task_id, act_seconds=0.5))
    if accepted:
        assert summary.status == "ok", summary
        assert summary.steps > 1
    else:
        assert summary.failure == Failure.INVALID_ACTION, summary
        assert summary.steps == 0


def test_a_numpy_action_gives_the_same_episode_as_the_plain_value(kernel: Kernel) -> None:
    plain = kernel.evaluate(numpy_policy("choice"), FAST, 3)
    wrapped = kernel.evaluate(numpy_policy("np.int64(choice)"), FAST, 3)
    assert comparable(plain)["episodes"] == comparable(wrapped)["episodes"]
    task = with_limits("pendulum", act_seconds=0.5)
    listed = kernel.evaluate(numpy_policy("[torque]"), task, 2)
    arrayed = kernel.evaluate(numpy_policy("np.array([torque])"), task, 2)
    assert [s.episode_return for s in listed.episodes] == [
        s.episode_return for s in arrayed.episodes
    ]


# -- state lives as long as its episode ------------------------------------------

COUNTING = """
import os

CALLS = 0

def make_policy(context):
    print("start global", CALLS, "file", os.path.exists("memo.txt"), "env", os.environ.get("MEMO"))
    with open("memo.txt", "w") as f:
        f.write("left by an earlier episode")
    os.environ["MEMO"] = "set"
    Policy.episodes += 1
    print("class", Policy.episodes)
    return Policy()

class Policy:
    episodes = 0

    def __init__(self):
        self.count = 0

    def act(self, observation):
        global CALLS
        CALLS += 1
        self.count += 1
        print("count", self.count, CALLS)
        return self.count % 2
"""


def test_state_persists_within_an_episode(kernel: Kernel) -> None:
    task = with_parameters(FAST, max_episode_steps=12)
    feedback = kernel.evaluate(COUNTING, task, 2)
    for summary in feedback.episodes:
        assert summary.status == "ok", summary
        counts = re.findall(r"^count (\d+) (\d+)$", summary.stderr or "", re.M)
        assert counts == [(str(n), str(n)) for n in range(1, summary.steps + 1)]
    traced = feedback.traces[0].steps
    assert [step.action for step in traced] == [(n + 1) % 2 for n in range(len(traced))]


def test_nothing_carries_over_from_one_episode_to_the_next(kernel: Kernel) -> None:
    task = with_parameters(FAST, max_episode_steps=5)
    feedback = kernel.evaluate(COUNTING, task, 4, workers=1)
    for summary in feedback.episodes:
        assert summary.status == "ok", summary
        stderr = summary.stderr or ""
        assert "start global 0 file False env None" in stderr, stderr
        assert "class 1" in stderr, stderr
        assert "count 1 1" in stderr


# -- determinism -----------------------------------------------------------------

NUMPY_RANDOM = """
import numpy as np

def make_policy(context):
    return Policy(np.random.default_rng(context.policy_seed))

class Policy:
    def __init__(self, rng):
        self.rng = rng

    def act(self, observation):
        return int(self.rng.integers(2))
"""


@pytest.mark.parametrize("policy", ["baseline", "numpy"])
def test_feedback_is_identical_across_runs_and_worker_counts(
    kernel: Kernel, policy: str, tmp_path: Path
) -> None:
    task = TASKS["cartpole"]
    program = (
        capture(task.baseline_dir, tmp_path)
        if policy == "baseline"
        else kernel.program(NUMPY_RANDOM)
    )
    runs = [
        comparable(kernel.evaluate(program, task, 6, workers=workers))
        for workers in (1, 1, 2, None)
    ]
    assert runs[0]["traces"], "traces are part of what must replay"
    assert all(run == runs[0] for run in runs[1:])
    assert len({e["episode_return"] for e in runs[0]["episodes"]}) > 1, "episodes differ"


def test_different_seeds_give_different_episodes(kernel: Kernel) -> None:
    task = TASKS["cartpole"]
    program = kernel.program(NUMPY_RANDOM)
    first = comparable(kernel.evaluate(program, task, 4, seed=0))
    second = comparable(kernel.evaluate(program, task, 4, seed=1))
    assert first["traces"][0]["steps"][0] != second["traces"][0]["steps"][0]
    assert [e["episode_return"] for e in first["episodes"]] != [
        e["episode_return"] for e in second["episodes"]
    ]
    other_split = comparable(kernel.evaluate(program, task, 4, split="validation"))
    assert other_split["traces"][0]["steps"][0] != first["traces"][0]["steps"][0]


def test_a_replayed_index_is_the_same_episode_wherever_it_sits(kernel: Kernel) -> None:
    task = TASKS["cartpole"]
    program = kernel.program(NUMPY_RANDOM)
    alone = kernel.evaluate(program, task, [7])
    among = kernel.evaluate(program, task, [3, 7, 7, 11])
    assert [s.index for s in among.episodes] == [3, 7, 7, 11]
    for summary in (among.episodes[1], among.episodes[2]):
        assert summary.episode_return == alone.episodes[0].episode_return
        assert summary.steps == alone.episodes[0].steps


def test_on_episode_reports_every_episode_once(kernel: Kernel) -> None:
    seen: list[EpisodeSummary] = []
    feedback = kernel.evaluate(GOOD_CARTPOLE, FAST, 5, workers=2, on_episode=seen.append)
    assert sorted(s.index for s in seen) == [0, 1, 2, 3, 4]
    assert sorted(seen, key=lambda s: s.index) == feedback.episodes


# -- splits ------------------------------------------------------------------------


def test_splits_never_share_a_seed() -> None:
    task = TASKS["cartpole"]
    indices = list(range(3000))
    env: dict[str, set[int]] = {}
    policy: dict[str, set[int]] = {}
    for split in seeds.SPLITS:
        jobs = jobs_for(task, split, indices, SECRET)
        assert [job.index for job in jobs] == indices
        env[split] = {job.env_seed for job in jobs}
        policy[split] = {job.policy_seed for job in jobs}
        assert len(env[split]) == len(policy[split]) == len(indices)
    for a in seeds.SPLITS:
        for b in seeds.SPLITS:
            if a != b:
                assert not env[a] & env[b], (a, b)
                assert not policy[a] & policy[b], (a, b)
        assert not env[a] & set().union(*policy.values())


def test_jobs_depend_on_secret_task_split_and_index_only() -> None:
    cartpole, acrobot = TASKS["cartpole"], TASKS["acrobot"]
    assert jobs_for(cartpole, "train", [5], SECRET) == jobs_for(cartpole, "train", [5], SECRET)
    assert (
        jobs_for(cartpole, "train", [0, 5], SECRET)[1]
        == jobs_for(cartpole, "train", [5], SECRET)[0]
    )
    other_secret = seeds.secret_from_seed(1)
    assert jobs_for(cartpole, "train", [5], SECRET) != jobs_for(
        cartpole, "train", [5], other_secret
    )
    assert jobs_for(cartpole, "train", [5], SECRET)[0].env_seed != (
        jobs_for(acrobot, "train", [5], SECRET)[0].env_seed
    )
    assert all(0 <= j.env_seed < 2**64 for j in jobs_for(cartpole, "test", range(100), SECRET))


# -- host faults -------------------------------------------------------------------


class FaultyAdapter:
    """The real Gymnasium adapter with one of its calls broken on the second job."""

    name = "faulty-test"

    def __init__(self, where: str) -> None:
        self.inner = load_adapter("gymnasium")
        self.where = where
        self.calls = 0

    def spec(self, parameters: Mapping[str, Any]) -> EnvSpec:
        if self.where == "spec":
            raise RuntimeError("spec broke")
        if self.where == "spec-error":
            raise AdapterError("parameters this adapter cannot use")
        return self.inner.spec(parameters)

    def make_episode(self, parameters: Mapping[str, Any], seed: int) -> Any:
        self.calls += 1
        episode = self.inner.make_episode(parameters, seed)
        if self.calls < 2:
            return episode
        if self.where == "make_episode":
            raise RuntimeError("make_episode broke")
        return FaultyEpisode(episode, self.where)


class FaultyEpisode:
    def __init__(self, inner: Any, where: str) -> None:
        self.inner = inner
        self.where = where
        self.steps = 0

    def reset(self) -> Any:
        if self.where == "reset":
            raise RuntimeError("reset broke")
        return self.inner.reset()

    def step(self, action: Any) -> Step:
        self.steps += 1
        if self.where == "step" and self.steps == 3:
            raise RuntimeError("step broke")
        step = self.inner.step(action)
        if self.where == "observation" and self.steps == 3:
            return Step(object(), step.reward, step.terminated, step.truncated)
        if self.where == "reward" and self.steps == 3:
            return Step(step.observation, "lots", step.terminated, step.truncated)  # type: ignore[arg-type]
        return step

    def metrics(self) -> dict[str, float]:
        if self.where == "metrics":
            raise RuntimeError("metrics broke")
        return self.inner.metrics()

    def close(self) -> None:
        self.inner.close()
        if self.where == "close":
            raise RuntimeError("close broke")


FAULTS = ["spec", "spec-error", "make_episode", "reset", "step", "observation", "metrics", "close"]


@pytest.mark.parametrize("workers", [1, 3])
@pytest.mark.parametrize("where", FAULTS)
def test_an_adapter_fault_aborts_the_evaluation_and_is_never_a_policy_failure(
    kernel: Kernel,
    where: str,
    workers: int,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(adapters._loaded, FaultyAdapter.name, FaultyAdapter(where))
    task = FAST.model_copy(update={"adapter": FaultyAdapter.name})
    program = kernel.program(GOOD_CARTPOLE)
    seen: list[EpisodeSummary] = []
    with pytest.raises(EvaluationAborted) as caught:
        kernel.evaluate(program, task, 4, on_episode=seen.append, workers=workers)
    if where != "spec-error":
        assert "fault" in str(caught.value)
    assert all(s.status == "ok" for s in seen), "nothing may be reported as a policy failure"
    # No episode it started is still starting: the host may remove the program's snapshot
    # (the CLI does) without a policy process failing to copy it.
    shutil.rmtree(program.path)
    kernel.runner.settle()
    assert "cannot confine" not in capfd.readouterr().err
    # The runner is unharmed: the next evaluation runs normally.
    assert kernel.evaluate(GOOD_CARTPOLE, FAST, 1).episodes[0].status == "ok"


def test_a_non_numeric_reward_is_an_adapter_fault(
    kernel: Kernel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(adapters._loaded, FaultyAdapter.name, FaultyAdapter("reward"))
    task = FAST.model_copy(update={"adapter": FaultyAdapter.name})
    with pytest.raises(EvaluationAborted):
        kernel.evaluate(GOOD_CARTPOLE, task, 2)


def test_an_unknown_adapter_aborts_before_any_episode(kernel: Kernel) -> None:
    task = FAST.model_copy(update={"adapter": "no-such-adapter"})
    with pytest.raises(EvaluationAborted, match="no adapter named"):
        evaluate(kernel.program(GOOD_CARTPOLE), task, kernel.jobs(task, 2), runner=kernel.runner)


def test_an_invalid_action_raised_by_the_adapter_is_the_policys_failure(kernel: Kernel) -> None:
    summary = kernel.only(policy_with_act("return 7"), FAST)
    assert summary.failure == Failure.INVALID_ACTION
