"""The process executor: worker processes with runners of their own, real policy processes,
real Gymnasium and Crafter. The same feedback as the thread executor, whatever the number of
workers; a worker lost mid-episode is a host fault, and its episode runs again elsewhere."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evopolicy_mcp.evaluation.dispatch import ATTEMPTS
from evopolicy_mcp.evaluation.episodes import EvaluationAborted, evaluate
from evopolicy_mcp.evaluation.feedback import EpisodeSummary, Feedback
from evopolicy_mcp.evaluation.plan import (
    EpisodeJob,
    Outcome,
    Plan,
    WireError,
    decode_outcome,
    encode_outcome,
    pack,
    unpack,
)
from evopolicy_mcp.evaluation.processes import ProcessExecutor
from evopolicy_mcp.evaluation.snapshot import ProgramError, read_files, restore
from evopolicy_mcp.host.authority import Host
from tests.support.crafter import SHORT, WOOD_AND_TABLE
from tests.support.host import GOOD, charges, write_task
from tests.support.kernel import (
    FAST,
    GOOD_CARTPOLE,
    TASKS,
    Kernel,
    children_of,
    comparable,
    policy_with_act,
    process_state,
    with_limits,
    with_parameters,
)
from tests.support.plugins import install_killer

# Fails on some seeds, prints on others: feedback with every kind of episode in it.
MIXED = policy_with_act(
    """\
    self.steps += 1
    if self.seed % 3 == 0 and self.steps == 5:
        raise ValueError("seed %d gives up" % self.seed)
    if self.seed % 3 == 1:
        print("step", self.steps)
    return 1 if observation[2] + 0.5 * observation[3] > 0 else 0
    """,
    init="self.seed = context.policy_seed\nself.steps = 0",
)


# Balances for all its steps, 20 ms a step: an episode of 60 steps takes over a second.
SLOW_BALANCE = policy_with_act(
    "time.sleep(0.02)\nreturn 1 if observation[2] + 0.5 * observation[3] > 0 else 0",
    top="import time",
)

# Deadlines far from what these policies need: a busy machine must not decide an episode
# (a worker started in the middle of an evaluation starts its template then).
ROOMY = with_limits(FAST, startup_seconds=20.0, act_seconds=5.0, episode_seconds=30.0)


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessExecutor]:
    with ProcessExecutor(2) as executor:
        yield executor


def exactly(feedback: Feedback) -> str:
    """Feedback as stored, wall-clock times aside: what must match byte for byte."""
    return Feedback.model_validate(comparable(feedback)).model_dump_json()


def test_worker_processes_give_the_feedback_of_the_thread_executor_byte_for_byte(
    kernel: Kernel, pool: ProcessExecutor
) -> None:
    task = with_parameters(ROOMY, max_episode_steps=60).model_copy(update={"trace_episodes": 3})
    program = kernel.program(MIXED)
    jobs = kernel.jobs(task, 9)
    assert {job.policy_seed % 3 for job in jobs} == {0, 1, 2}, "the seeds should mix all kinds"
    threads = evaluate(program, task, jobs, runner=kernel.runner, workers=2)
    assert threads.failures == {"exception": sum(j.policy_seed % 3 == 0 for j in jobs)}
    assert any(e.stderr for e in threads.episodes) and len(threads.traces) == 3
    seen: list[EpisodeSummary] = []
    processes = evaluate(program, task, jobs, executor=pool, on_episode=seen.append)
    assert exactly(processes) == exactly(threads)
    assert sorted(s.index for s in seen) == [j.index for j in jobs]
    with ProcessExecutor(3) as three:
        again = evaluate(program, task, jobs, executor=three)
        assert [e.message for e in again.episodes] == [e.message for e in threads.episodes]
        assert exactly(again) == exactly(threads)


def test_crafter_reports_and_files_cross_from_a_worker_unchanged(
    kernel: Kernel, pool: ProcessExecutor, tmp_path: Path
) -> None:
    task = with_parameters(TASKS["crafter"], **{**SHORT, "length": 120})
    program = kernel.program(WOOD_AND_TABLE)
    jobs = kernel.jobs(task, 3)
    files: dict[str, dict[tuple[int, str], bytes]] = {"thread": {}, "process": {}}

    def keep(kind: str):  # type: ignore[no-untyped-def]
        return lambda index, name, data: files[kind].__setitem__((index, name), data)

    threads = evaluate(program, task, jobs, runner=kernel.runner, artifacts=keep("thread"))
    processes = evaluate(program, task, jobs, executor=pool, artifacts=keep("process"))
    assert exactly(processes) == exactly(threads)
    assert threads.episodes[0].report and threads.traces[0].artifacts
    assert files["process"] == files["thread"] and files["thread"]


def test_a_worker_killed_mid_episode_is_replaced_and_its_episode_run_again(
    kernel: Kernel,
) -> None:
    """Killing a worker while its episode runs: the episode runs again on a new worker,
    the feedback is what it would have been, nothing is a policy failure, and nothing
    of the dead worker is left running."""
    task = with_parameters(ROOMY, max_episode_steps=60)
    program = kernel.program(SLOW_BALANCE)
    jobs = kernel.jobs(task, 4)
    expected = evaluate(program, task, jobs, runner=kernel.runner)
    with ProcessExecutor(2) as pool:
        result: list[Feedback] = []
        thread = threading.Thread(
            target=lambda: result.append(evaluate(program, task, jobs, executor=pool))
        )
        thread.start()
        victim, family = _a_worker_in_an_episode(pool)
        os.kill(victim, signal.SIGKILL)
        thread.join(60)
        assert result, "the evaluation did not finish"
        assert exactly(result[0]) == exactly(expected)
        assert result[0].failures == {}
        assert victim not in pool.worker_pids()
        _all_gone(family)


def test_closing_the_executor_mid_evaluation_aborts_it_and_leaves_nothing_running(
    kernel: Kernel,
) -> None:
    task = with_parameters(ROOMY, max_episode_steps=60)
    pool = ProcessExecutor(2)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            evaluate(kernel.program(SLOW_BALANCE), task, kernel.jobs(task, 6), executor=pool)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    _victim, family = _a_worker_in_an_episode(pool)
    family += [
        p for w in pool.worker_pids() for t in children_of(w) for p in [w, t, *children_of(t)]
    ]
    started = time.monotonic()
    pool.close()
    thread.join(30)
    assert time.monotonic() - started < 10, "closing waited for the episodes to end"
    assert len(errors) == 1 and isinstance(errors[0], EvaluationAborted), errors
    assert "closed" in str(errors[0])
    _all_gone(family)


def _a_worker_in_an_episode(pool: ProcessExecutor) -> tuple[int, list[int]]:
    """A worker whose template runs a policy process, and that family of processes."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for worker in pool.worker_pids():
            templates = children_of(worker)
            policies = [p for t in templates for p in children_of(t)]
            if templates and len(policies) > 2:  # two spares and an episode's process
                return worker, [worker, *templates, *policies]
        time.sleep(0.01)
    raise AssertionError("no worker started an episode")


def _all_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + 10
    while any(process_state(p) not in (None, "Z") for p in pids):
        assert time.monotonic() < deadline, [p for p in pids if process_state(p) not in (None, "Z")]
        time.sleep(0.05)


def test_an_episode_that_kills_every_worker_aborts_its_evaluation_as_a_host_fault(
    kernel: Kernel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = FAST.model_copy(update={"adapter": install_killer(tmp_path, monkeypatch)})
    with ProcessExecutor(2) as pool:
        with pytest.raises(EvaluationAborted, match=f"lost {ATTEMPTS} times"):
            evaluate(kernel.program(GOOD_CARTPOLE), task, kernel.jobs(task, 2), executor=pool)
        # The workers that died were replaced: the executor goes on serving.
        good = evaluate(kernel.program(GOOD_CARTPOLE), FAST, kernel.jobs(FAST, 2), executor=pool)
        assert [e.status for e in good.episodes] == ["ok", "ok"]


def test_a_host_whose_workers_keep_dying_refunds_the_submission(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    killer = install_killer(tmp_path, monkeypatch)
    tasks = write_task(tmp_path / "tasks", "doomed")
    toml = tasks / "doomed.toml"
    toml.write_text(toml.read_text().replace('adapter = "gymnasium"', f'adapter = "{killer}"'))
    with Host(data_dir, tasks_dirs=[tasks], executor="process", workers=2) as host:
        run = host.start_run("doomed").run_id
        sub = host.submit(run, "0:2", files={"policy.py": GOOD})
        view = host.wait(run, sub, 120)
        assert view.status == "failed" and view.message and "not charged" in view.message
        assert charges(host, run) == (0, 0, 1)


def test_a_host_on_worker_processes_judges_as_a_host_on_threads(
    data_dir: Path, tasks_dir: Path, tmp_path: Path
) -> None:
    """Submissions, validation and assessment: the same results whatever the executor."""
    reports = []
    for kind, where in (("thread", data_dir), ("process", tmp_path / "other")):
        with Host(where, tasks_dirs=[tasks_dir], seed=5, executor=kind) as host:
            run = host.start_run("mini").run_id
            subs = [
                host.submit(run, "0:3", files={"policy.py": GOOD}),
                host.submit(run, "1:4", files={"policy.py": MIXED}),
            ]
            views = [host.wait(run, sub, 120) for sub in subs]
            assert [v.status for v in views] == ["complete", "complete"]
            host.finalize(run, subs)
            assert host.wait_final(run, 240).state == "finalized"
            report = host.report(run).model_dump(mode="json")
            reports.append(
                (
                    [v.score for v in views],
                    report["selected"],
                    report["validation"],
                    report["assessment"],
                )
            )
    assert reports[0] == reports[1]


# -- the wire ------------------------------------------------------------------------


def test_an_outcome_crosses_the_wire_through_the_feedback_models_only() -> None:
    summary = EpisodeSummary(index=3, status="ok", episode_return=1.5, steps=2)
    header, blobs = encode_outcome(Outcome(summary, None, {"replay.gif": b"GIF89a"}))
    message, sent = unpack(pack({"outcome": header}, blobs))
    back = decode_outcome(message["outcome"], sent)
    assert back.summary == summary and back.files == {"replay.gif": b"GIF89a"}
    for bad in (
        {**header, "summary": {**header["summary"], "status": "great"}},
        {**header, "files": ["../escape"]},
        {**header, "files": []},
        {"summary": header["summary"]},
    ):
        with pytest.raises(WireError):
            decode_outcome(bad, blobs)
    data = pack({"a": 1}, [b"xyz"])
    for broken in (data[:-1], data + b"!", data[:3]):
        with pytest.raises(WireError):
            unpack(broken)


def test_a_program_sent_elsewhere_is_stored_only_if_it_hashes_to_its_digest(
    kernel: Kernel, tmp_path: Path
) -> None:
    program = kernel.program(GOOD_CARTPOLE, helper="X = 1\n")
    files = read_files(program)
    assert restore(files, tmp_path, program.digest).digest == program.digest
    with pytest.raises(ProgramError, match="hashes to"):
        restore({**files, "helper.py": b"X = 2\n"}, tmp_path / "b", program.digest)
    with pytest.raises(ProgramError):
        restore({**files, "../up.py": b""}, tmp_path / "c", program.digest)


def test_a_plan_names_its_task_and_program_and_nothing_of_a_run(kernel: Kernel) -> None:
    program = kernel.program(GOOD_CARTPOLE)
    plan = Plan(program=program, task=FAST, traced=frozenset({1}), share="run-secret-holder")
    header = plan.header()
    again = Plan.from_header(header, program)
    assert again.task.model_dump() == plan.task.model_dump()
    assert (again.traced, again.key) == (plan.traced, plan.key)
    assert "run-secret-holder" not in str(header) and "secret" not in str(header)
    assert EpisodeJob(0, 1, 2) == EpisodeJob(0, 1, 2)


# -- sharing between runs ------------------------------------------------------------


@pytest.mark.parametrize("shares", [("big-run", "small-run"), ("one-run", "one-run")])
def test_a_small_evaluation_is_not_starved_by_another_runs_big_one(
    kernel: Kernel, pool: ProcessExecutor, shares: tuple[str, str]
) -> None:
    """Two runs' evaluations at once: a free worker takes the next episode of the run with
    fewer running, so the small one is done after a few of the big one's episodes. Within
    one run, evaluations are served oldest first (the contrast that shows the rule acts)."""
    task = with_parameters(ROOMY, max_episode_steps=15)
    program = kernel.program(policy_with_act("time.sleep(0.01)\nreturn 0", top="import time"))
    done: list[str] = []
    lock = threading.Lock()

    def note(name: str):  # type: ignore[no-untyped-def]
        def on_done(outcome: Outcome) -> None:
            with lock:
                done.append(name)

        return on_done

    def run(name: str, share: str, count: int) -> None:
        plan = Plan(program=program, task=task, share=share)
        pool.run(plan, kernel.jobs(task, count), note(name))

    big = threading.Thread(target=run, args=("big", shares[0], 24))
    big.start()
    while done.count("big") < 2:
        time.sleep(0.005)
    run("small", shares[1], 2)
    with lock:
        big_before_small_ended = done.count("big")
    big.join(120)
    assert done.count("big") == 24
    if shares[0] != shares[1]:
        assert big_before_small_ended <= 2 + 4, done
    else:
        assert big_before_small_ended == 24, done


def test_a_run_with_many_submissions_waiting_does_not_hold_up_another_run(
    data_dir: Path, tasks_dir: Path
) -> None:
    """One evaluation at a time: run A queues three submissions, then run B one; B's is
    the next to start, not the last."""
    started: list[str] = []
    lock = threading.Lock()

    def first_progress(name: str):  # type: ignore[no-untyped-def]
        def on_progress(done: int, _total: int) -> None:
            with lock:
                if done == 1:
                    started.append(name)

        return on_progress

    with Host(data_dir, tasks_dirs=[tasks_dir], seed=5, concurrency=1) as host:
        a, b = host.start_run("mini").run_id, host.start_run("mini").run_id
        slow = {"policy.py": policy_with_act("time.sleep(0.002)\nreturn 0", top="import time")}
        subs = [
            (f"a{i}", a, host.submit(a, "0:2", files=slow, on_progress=first_progress(f"a{i}")))
            for i in range(3)
        ]
        subs.append(("b0", b, host.submit(b, "0:2", files=slow, on_progress=first_progress("b0"))))
        for _name, run, sub in subs:
            assert host.wait(run, sub, 120).status == "complete"
    assert started == ["a0", "b0", "a1", "a2"]
