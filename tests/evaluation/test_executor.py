"""The executor: one host thread drives an evaluation's episodes, one at a time or several
at once, with real policy processes and real Gymnasium (see tests.support.kernel)."""

from __future__ import annotations

import os
import shutil
import sys
import time

import pytest

from evopolicy_mcp.evaluation.episodes import EvaluationAborted
from evopolicy_mcp.evaluation.executor import (
    SPIN_SWITCH_SECONDS,
    Placement,
    ThreadExecutor,
    default_workers,
)
from tests.support.kernel import (
    FAST,
    GOOD_CARTPOLE,
    SLOW_START,
    Kernel,
    policy_with_act,
    with_parameters,
)


def test_placement_gives_the_host_a_cpu_and_shares_one_only_where_it_must() -> None:
    assert [default_workers(n) for n in (1, 2, 3, 4, 16)] == [1, 2, 2, 3, 15]
    pool = ThreadExecutor(5)
    pool.cpus = [0, 1, 2, 3]
    places = [pool.placement(slot) for slot in range(5)]
    assert {p.host_cpu for p in places} == {0}
    assert [p.policy_cpu for p in places] == [1, 2, 3, 1, 2]
    assert [p.shared for p in places] == [True, True, False, True, True]
    pool = ThreadExecutor(3)
    pool.cpus = [0, 1, 2, 3]
    assert not any(pool.placement(slot).shared for slot in range(3))
    pool.cpus = [7]
    assert pool.placement(2) == Placement(7, 7, 0)  # one CPU: all share it and sleep


def test_a_host_with_every_episode_starting_sleeps(kernel: Kernel) -> None:
    """Episodes at once whose policies all take a while to start: the host, with
    nothing to step, must sleep (its CPU is where the template forks), not spin."""
    task = with_parameters(FAST, max_episode_steps=1)
    program = kernel.program(SLOW_START)
    kernel.evaluate(program, task, 3, workers=3)  # warm: imports, spares
    cpu, wall = time.process_time(), time.monotonic()
    feedback = kernel.evaluate(program, task, 3, workers=3)
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    assert [s.status for s in feedback.episodes] == ["ok"] * 3
    assert wall >= 0.3, "READY came before make_policy returned"
    assert cpu < 0.1, f"the host used {cpu * 1000:.0f} ms of CPU in {wall * 1000:.0f} ms"


# Even seeds close their action pipe and keep running (the host waits 0.5 s for the
# process, then kills it); odd ones print 256 KiB at every step.
BLOCKS_OR_PRINTS = policy_with_act(
    """\
    self.steps += 1
    if self.seed % 2 == 0:
        if self.steps == 3:
            os.close(4)
            time.sleep(3)
    else:
        sys.stderr.write(("z" * 1023 + "\\n") * 256)
    return 0
    """,
    top="import os, sys, time",
    init="self.seed = context.policy_seed\nself.steps = 0",
)


def test_time_the_host_spends_on_one_episode_is_not_charged_to_the_others(
    kernel: Kernel,
) -> None:
    """Several episodes at once share one host thread: while it waits for one (here
    for a process that would not die), the others' printing is not drained and their
    answers not taken. That must cost them nothing: the same episodes as one at a time."""
    task = with_parameters(FAST, max_episode_steps=8)
    modes = [job.policy_seed % 2 for job in kernel.jobs(task, 6)]
    assert 0 < sum(modes) < 6, "the seeds should mix both kinds"
    program = kernel.program(BLOCKS_OR_PRINTS)
    outcomes = [
        [
            (e.status, e.failure, e.steps)
            for e in kernel.evaluate(program, task, 6, workers=w).episodes
        ]
        for w in (1, 3)
    ]
    assert outcomes[0] == outcomes[1]
    assert [status for status, _, _ in outcomes[0]] == ["ok" if m else "failed" for m in modes]


@pytest.mark.parametrize("workers", [1, 3])
def test_a_runner_fault_while_waiting_aborts_as_a_host_fault(kernel: Kernel, workers: int) -> None:
    """A policy process that dies before it is confined died of the host's fault (here
    its program's snapshot is gone): the evaluation aborts, nothing is a policy failure,
    and the aborted episodes keep no descriptor open."""
    kernel.evaluate(GOOD_CARTPOLE, FAST, 1, workers=workers)  # warm: descriptors of the runner
    program = kernel.program(GOOD_CARTPOLE)
    shutil.rmtree(program.path)
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(EvaluationAborted, match="host fault in the policy runner"):
        kernel.evaluate(program, FAST, 3, workers=workers)
    kernel.runner.settle()
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="workers spin with two CPUs each")
def test_a_spinning_worker_lets_other_threads_have_the_gil_within_half_a_millisecond(
    kernel: Kernel,
) -> None:
    """A spinning worker holds the GIL; the server's thread must not wait Python's
    default 5 ms for it at every turn."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    try:
        feedback = kernel.evaluate(GOOD_CARTPOLE, "cartpole", 1, workers=1)
        assert feedback.episodes[0].steps == 500
        assert sys.getswitchinterval() <= SPIN_SWITCH_SECONDS == 0.0005
    finally:
        sys.setswitchinterval(before)
