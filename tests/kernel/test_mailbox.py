"""The shared-memory mailbox: its format on its own, then real policy processes that use it.

Spinning hand-overs (a worker and its policy process on two CPUs) go through
the mailbox on x86-64. A frame too large for a slot takes the pipe; a policy
that scribbles on the shared pages sends only itself garbage.
"""

from __future__ import annotations

import os
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evopolicy_mcp.kernel import frames, mailbox
from evopolicy_mcp.kernel.confine import ProcessLimits
from evopolicy_mcp.kernel.mailbox import Mailbox
from evopolicy_mcp.runner.process import Failure, PolicyFailure, PolicyProcess, RunnerError
from evopolicy_mcp.runner.template import Runner
from tests.support.kernel import FAST, SLOW_START, policy_with_act

pytestmark = pytest.mark.skipif(not mailbox.supported(), reason="the mailbox is x86-64 only")

CONTEXT = {
    "task_id": "t",
    "observation_space": {},
    "action_space": {},
    "parameters": {},
    "metadata": {},
    "policy_seed": 1,
}


@pytest.fixture
def pair() -> Iterator[tuple[Mailbox, Mailbox]]:
    fd = mailbox.create()
    try:
        host, policy = Mailbox(fd, host=True), Mailbox(fd, host=False)
    finally:
        os.close(fd)
    yield host, policy
    host.close()
    policy.close()


def test_a_mailbox_cannot_be_resized_by_anyone() -> None:
    fd = mailbox.create()
    try:
        assert os.fstat(fd).st_size == mailbox.SIZE
        for size in (0, mailbox.SIZE * 2):
            with pytest.raises(PermissionError):
                os.ftruncate(fd, size)  # a shrunk mapping would crash the host (SIGBUS)
    finally:
        os.close(fd)


def test_messages_go_both_ways_once_each(pair: tuple[Mailbox, Mailbox]) -> None:
    host, policy = pair
    assert policy.take() is None and not policy.pending()
    observation = frames.frame(frames.OBSERVATION, [1.0, 2.0])
    assert host.send(observation)
    assert policy.pending()
    assert policy.spin(10) == observation
    assert policy.take() is None  # taken once
    action = frames.frame(frames.ACTION, 1)
    assert policy.send(action)
    assert host.take() == action


def test_a_frame_too_large_for_its_slot_is_announced_for_the_pipe(
    pair: tuple[Mailbox, Mailbox],
) -> None:
    host, policy = pair
    assert not host.send(bytes(mailbox.H2P_SLOT + 1))
    host.sent_on_pipe()
    assert policy.take() == mailbox.ON_PIPE
    policy.took_from_pipe()  # the frame, read from the pipe
    assert policy.take() is None
    small = frames.frame(frames.OBSERVATION, 3)
    assert host.send(small)
    assert policy.take() == small


def test_a_frame_read_from_the_pipe_before_its_notice_leaves_no_stale_notice(
    pair: tuple[Mailbox, Mailbox],
) -> None:
    host, policy = pair
    policy.took_from_pipe()  # the receiver was asleep on the pipe and took the frame first
    host.sent_on_pipe()  # then the sender's notice lands
    assert policy.take() is None, "the notice is for a frame already taken"
    small = frames.frame(frames.OBSERVATION, 4)
    assert host.send(small)
    assert policy.take() == small


def test_a_length_beyond_the_slot_is_cut_and_then_rejected(
    pair: tuple[Mailbox, Mailbox],
) -> None:
    host, policy = pair
    assert policy.send(b"\xff\xff\xff\x7f" + b"A" + bytes(16))  # claims 2 GiB
    got = host.take()
    assert got is not None and len(got) == mailbox.P2H_SLOT
    with pytest.raises(frames.FrameError, match="exceeds the limit"):
        frames.parse_whole(got, 1 << 20)


def test_sleep_flags_are_seen_by_the_other_side(pair: tuple[Mailbox, Mailbox]) -> None:
    host, policy = pair
    assert not host.peer_asleep()
    policy.sleeping(True)
    assert host.peer_asleep() and not policy.peer_asleep()
    policy.sleeping(False)
    assert not host.peer_asleep()


def test_a_sleeper_that_dozes_off_after_a_message_came_stays_awake(
    pair: tuple[Mailbox, Mailbox],
) -> None:
    host, policy = pair
    assert policy.doze() and host.peer_asleep()  # nothing came: it may sleep
    policy.sleeping(False)
    assert host.send(frames.frame(frames.OBSERVATION, 1))
    assert not policy.doze(), "a message is waiting: take it instead of sleeping"
    assert not host.peer_asleep()


def test_post_takes_the_pipe_for_a_large_frame_and_says_whether_to_wake(
    pair: tuple[Mailbox, Mailbox],
) -> None:
    host, policy = pair
    piped: list[bytes] = []
    small = frames.frame(frames.OBSERVATION, 5)
    assert host.post(small, piped.append) is False and piped == []
    assert policy.take() == small
    large = bytes(mailbox.H2P_SLOT + 1)
    policy.sleeping(True)
    assert host.post(large, piped.append) is True  # asleep: it needs a WAKE on the pipe
    assert piped == [large] and policy.take() == mailbox.ON_PIPE


# -- real policy processes ------------------------------------------------------


@pytest.fixture(scope="module")
def runner() -> Iterator[Runner]:
    r = Runner()
    yield r
    r.close()


def program(tmp_path: Path, source: str) -> str:
    (tmp_path / "policy.py").write_text(textwrap.dedent(source))
    return str(tmp_path)


def opened(runner: Runner, path: str, spin: int) -> AbstractContextManager[PolicyProcess]:
    """A policy process of the program at ``path``, with FAST's deadlines."""
    lim = FAST.limits
    return runner.open(
        path,
        ProcessLimits(),
        act_seconds=lim.act_seconds,
        startup_seconds=lim.startup_seconds,
        episode_seconds=lim.episode_seconds,
        spin=spin,
    )


def episode(runner: Runner, path: str, spin: int, steps: list[Any]) -> tuple[list[Any], str]:
    with opened(runner, path, spin) as proc:
        proc.start(CONTEXT)
        answers = [proc.act(observation) for observation in steps]
    return answers, proc.output()


MAPS = """
def make_policy(context):
    with open("/proc/self/maps") as f:
        print("MAILBOX" if "evopolicy-mailbox" in f.read() else "PIPES", flush=True)
    return Policy()

class Policy:
    def act(self, observation):
        return int(sum(observation))
"""


@pytest.mark.parametrize(("spin", "seen"), [(256, "MAILBOX"), (0, "PIPES")])
def test_spinning_hand_overs_use_the_mailbox_and_sleeping_ones_the_pipes(
    runner: Runner, tmp_path: Path, spin: int, seen: str
) -> None:
    answers, output = episode(runner, program(tmp_path, MAPS), spin, [[1, 2], [3, 4], [5]])
    assert answers == [3, 7, 5]
    assert output.split() == [seen]


SIZES = """
import time

def make_policy(context):
    return Policy()

class Policy:
    def act(self, observation):
        if len(observation) == 2:
            time.sleep(0.05)  # the host goes to sleep: the answer must wake it
        return [len(observation), int(observation[-1])]
"""


def test_an_observation_larger_than_a_slot_takes_the_pipe_and_the_next_the_mailbox(
    runner: Runner, tmp_path: Path
) -> None:
    big = np.arange(mailbox.H2P_SLOT // 8 + 10, dtype=np.int64)  # more than 4 MiB
    steps = [np.array([1, 2]), big, np.array([7]), big, big, np.array([8, 9])]
    answers, _ = episode(runner, program(tmp_path, SIZES), 256, steps)
    assert answers == [[len(s), int(s[-1])] for s in steps]


def test_a_policy_that_scribbles_on_the_mailbox_ends_in_a_protocol_error(
    runner: Runner, tmp_path: Path
) -> None:
    source = policy_with_act(
        """
        box = sys.modules["evopolicy_mcp.kernel.child"]._BOX
        box._mm[:] = os.urandom(len(box._mm))  # every byte, both slots and counters
        time.sleep(30)
        """,
        top="import os, sys, time",
    )
    with pytest.raises(PolicyFailure) as failed:
        episode(runner, program(tmp_path, source), 256, [[0.0]])
    assert failed.value.code == Failure.PROTOCOL_ERROR, failed.value.message
    # The runner serves the next episode as if nothing happened.
    (tmp_path / "next").mkdir()
    answers, _ = episode(runner, program(tmp_path / "next", MAPS), 256, [[2, 2]])
    assert answers == [4]


def test_the_mailbox_descriptor_does_not_reach_the_program(runner: Runner, tmp_path: Path) -> None:
    source = """
    import os

    def make_policy(context):
        links = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                links.append(os.readlink(f"/proc/self/fd/{fd}"))
            except FileNotFoundError:  # the descriptor listdir itself had open
                pass
        print(" ".join(links), flush=True)
        return Policy()

    class Policy:
        def act(self, observation):
            return 0
    """
    _answers, output = episode(runner, program(tmp_path, source), 256, [[0]])
    assert "evopolicy-mailbox" not in output, output


FLOODER = """
import os, struct, threading, time

ACTION = struct.pack("<IB", 10, ord("A")) + b"i" + bytes(8)

def flood():
    while True:
        try:
            os.write(4, ACTION)  # answers without reading anything
        except OSError:
            return
        time.sleep(0.001)

def make_policy(context):
    return Policy()

class Policy:
    def act(self, observation):
        threading.Thread(target=flood, daemon=True).start()
        time.sleep(60)  # never reads the next observation
"""


@pytest.mark.parametrize("spin", [0, 256])
def test_a_policy_that_stops_reading_cannot_hold_the_host_in_a_write(
    runner: Runner, tmp_path: Path, spin: int
) -> None:
    # Observations too large for the pipe's buffer (and, spinning, for the mailbox's slot).
    big = np.zeros(mailbox.H2P_SLOT // 8 + 1 if spin else 1 << 15, dtype=np.int64)
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            episode(runner, program(tmp_path, FLOODER), spin, [big] * 4)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the host is stuck writing to a policy that reads nothing"
    failure = outcome[0]
    assert isinstance(failure, PolicyFailure), failure
    assert failure.code == Failure.TIMEOUT and "stopped reading" in failure.message, failure


CRASH_LATER = """
import os, signal, threading, time

def crash():
    time.sleep(0.1)
    os.kill(os.getpid(), signal.SIGSEGV)  # while the main thread waits for the host

def make_policy(context):
    threading.Thread(target=crash, daemon=True).start()
    return Policy()

class Policy:
    def act(self, observation):
        return 0
"""


@pytest.mark.parametrize("spin", [0, 256])
def test_a_policy_dying_while_it_waits_is_a_crash_never_a_host_fault(
    runner: Runner, tmp_path: Path, spin: int
) -> None:
    path = program(tmp_path, CRASH_LATER)
    with opened(runner, path, spin) as proc:
        proc.start(CONTEXT)
        time.sleep(0.3)  # it went to sleep waiting for an observation, then died
        with pytest.raises(PolicyFailure) as failed:
            for _ in range(3):
                proc.act([0.0])
    assert failed.value.code == Failure.CRASHED, failed.value
    assert "SIGSEGV" in failed.value.message


def test_a_spinning_worker_sleeps_while_its_policy_process_starts(
    runner: Runner, tmp_path: Path
) -> None:
    # Its CPU is the template's, which forks the next spare meanwhile. The worker used to
    # spin (yielding) for the first 25 ms of a start-up, and so took about half of that.
    path = program(tmp_path, SLOW_START)
    with opened(runner, path, 256) as proc:
        proc.send_context(CONTEXT)
        cpu, wall = time.thread_time(), time.monotonic()
        proc.wait_ready()
        cpu, wall = time.thread_time() - cpu, time.monotonic() - wall
        assert proc.act([0.0]) == 0
    assert wall >= 0.25, "READY came before make_policy returned"
    assert cpu < 0.005, f"the worker used {cpu * 1000:.1f} ms of CPU waiting for READY"


UNSAY = """
import os

def make_policy(context):
    # Its own action pipe opened for reading, to take back anything it said, then the
    # exit status a process that could not be confined has.
    fd = os.open("/proc/self/fd/4", os.O_RDONLY | os.O_NONBLOCK)
    try:
        os.read(fd, 64)
    except BlockingIOError:
        pass
    os._exit(71)
"""


@pytest.mark.parametrize("spin", [0, 256])
def test_a_program_cannot_pass_its_death_off_as_a_host_fault(
    runner: Runner, tmp_path: Path, spin: int
) -> None:
    with pytest.raises(PolicyFailure) as failed:
        episode(runner, program(tmp_path, UNSAY), spin, [])
    assert failed.value.code == Failure.CRASHED, failed.value
    assert "code 71" in failed.value.message


@pytest.mark.parametrize("spin", [0, 256])
def test_a_process_that_dies_before_it_is_confined_is_a_host_fault(
    runner: Runner, tmp_path: Path, spin: int
) -> None:
    # The host hands over a program of more files than an episode's scratch holds: the
    # spare fails copying it, before any program code could run. That is never charged
    # to a policy; nor is a program that is not there, which the host cannot even open.
    crowded = tmp_path / "crowded"
    crowded.mkdir()
    for i in range(ProcessLimits().disk_files + 1):
        (crowded / f"m{i}.py").touch()
    with pytest.raises(RunnerError, match="before it was confined"):
        episode(runner, str(crowded), spin, [])
    with pytest.raises(RunnerError, match="cannot open the program's folder"):
        episode(runner, str(tmp_path / "missing"), spin, [])
    good = tmp_path / "good"
    good.mkdir()
    answers, _ = episode(runner, program(good, MAPS), spin, [[1, 1]])
    assert answers == [2], "the runner serves the next episode"
