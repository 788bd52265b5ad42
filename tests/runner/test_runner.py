"""Policy processes that misbehave on purpose, run through the real runner on real Gymnasium.

Each failure code of the runner is produced by a real policy doing the wrong
thing; limits are shrunk per test so that every one of them ends in a second
or two. Tests that fork keep to a handful of processes and check that none of
them outlives its episode.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from evopolicy_mcp.evaluation.loop import STDERR_CHARS
from evopolicy_mcp.kernel import frames, limits
from evopolicy_mcp.runner.template import Failure
from tests.support.kernel import (
    FAST,
    IMPORTS,
    Kernel,
    assert_failed,
    line_of,
    policy_with_act,
    with_limits,
)

# -- exception ---------------------------------------------------------------


def test_an_exception_in_make_policy_names_policy_py_and_the_line(kernel: Kernel) -> None:
    source = """\
    import json

    def make_policy(context):
        settings = {"gain": 1.0}
        return settings["missing"]
    """
    summary = kernel.only(source, FAST)
    assert_failed(summary, Failure.EXCEPTION)
    assert summary.steps == 0
    assert "KeyError" in (summary.message or "") and "make_policy" in (summary.message or "")
    assert summary.traceback is not None
    line = line_of(textwrap.dedent(source), 'return settings["missing"]')
    assert f'File "policy.py", line {line}, in make_policy' in summary.traceback
    assert 'return settings["missing"]' in summary.traceback


def test_an_exception_in_act_ends_the_episode_with_its_traceback(kernel: Kernel) -> None:
    source = policy_with_act(
        """\
        self.steps += 1
        if self.steps == 4:
            raise ValueError("step four is broken")
        return 0
        """,
        init="self.steps = 0",
    )
    summary = kernel.only(source, FAST)
    assert_failed(summary, Failure.EXCEPTION)
    assert summary.steps == 3  # three actions were taken before act raised
    assert summary.message == "in act(): ValueError: step four is broken"
    assert summary.traceback is not None
    assert summary.traceback.splitlines()[-1] == "ValueError: step four is broken"
    line = line_of(source, 'raise ValueError("step four is broken")')
    assert f'File "policy.py", line {line}, in act' in summary.traceback


def test_failure_texts_show_no_host_path(kernel: Kernel) -> None:
    # The exception message holds a path inside the program, and the traceback runs
    # through library code: neither may reveal where the host keeps programs.
    source = policy_with_act(
        """\
        import pathlib
        return pathlib.Path(__file__).with_name("settings.json").read_text()
        """
    )
    program = kernel.program(source)
    summary = kernel.only(program, FAST)
    assert_failed(summary, Failure.EXCEPTION)
    texts = (summary.message or "") + (summary.traceback or "")
    assert "FileNotFoundError" in texts and "settings.json" in texts
    assert "pathlib.py" in texts, "library frames are kept, by their short name"
    package = str(Path(frames.__file__).resolve().parents[1])
    for host_path in (str(kernel.store), str(program.path), package, sys.prefix, "/work/"):
        assert host_path not in texts, host_path


def test_sys_exit_is_caught_as_an_exception_not_a_crash(kernel: Kernel) -> None:
    starting = kernel.only("import sys\n\ndef make_policy(context):\n    sys.exit(0)\n", FAST)
    assert_failed(starting, Failure.EXCEPTION)
    assert "SystemExit" in (starting.message or "")
    acting = kernel.only(policy_with_act("import sys\nsys.exit('bye')"), FAST)
    assert_failed(acting, Failure.EXCEPTION)
    assert "SystemExit: bye" in (acting.message or "")


def test_an_exception_whose_str_fails_is_still_an_exception(kernel: Kernel) -> None:
    source = policy_with_act(
        "raise Unprintable()",
        top="""\
        class Unprintable(Exception):
            def __str__(self):
                raise RuntimeError("no text")
        """,
    )
    summary = kernel.only(source, FAST)
    assert_failed(summary, Failure.EXCEPTION)
    assert summary.traceback and "Unprintable" in summary.traceback


# -- timeout -----------------------------------------------------------------


@pytest.mark.parametrize("workers", [1, 3])
def test_an_endless_loop_in_act_times_out_at_the_act_deadline(kernel: Kernel, workers: int) -> None:
    source = policy_with_act(
        """\
        self.steps += 1
        while self.steps > 2:
            pass
        return 1
        """,
        init="self.steps = 0",
    )
    for summary in kernel.hostile(source, FAST, workers, workers=workers).episodes:
        assert_failed(summary, Failure.TIMEOUT)
        assert summary.steps == 2
        assert summary.message == "act() did not answer within 0.3 s"
        assert 0.3 <= summary.seconds < 3.0


# Deaf to the polite signals: only SIGKILL ends it.
DEAF = f"{IMPORTS}\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
DEAF += "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"


def test_a_policy_that_sleeps_forever_ignoring_sigterm_times_out(kernel: Kernel) -> None:
    acting = kernel.hostile(policy_with_act("time.sleep(10_000)", top=DEAF), FAST).episodes[0]
    assert_failed(acting, Failure.TIMEOUT)
    assert acting.seconds < 3.0
    starting = kernel.hostile(
        f"{DEAF}\ndef make_policy(context):\n    time.sleep(10_000)\n",
        with_limits(FAST, startup_seconds=0.5),
    ).episodes[0]
    assert_failed(starting, Failure.TIMEOUT)
    assert starting.message == "start-up did not answer within 0.5 s"


def test_the_episode_deadline_stops_a_policy_that_is_slow_at_every_step(kernel: Kernel) -> None:
    task = with_limits("cartpole", act_seconds=1.0, episode_seconds=0.5)
    # Pushing left ends CartPole in about 9 steps: 0.15 s each is well past the 0.5 s limit.
    summary = kernel.only(policy_with_act("import time\ntime.sleep(0.15)\nreturn 0"), task)
    assert_failed(summary, Failure.TIMEOUT)
    assert "0.5 s wall-clock limit" in (summary.message or "")
    assert summary.steps <= 4


# -- resource_limit ----------------------------------------------------------


@pytest.mark.parametrize(
    "allocation",
    ["bytearray(16 << 30)", "numpy.ones(2 << 30)", "[0] * (2 << 30)"],
    ids=["bytearray", "numpy", "list"],
)
def test_a_16_gb_allocation_is_stopped_by_the_memory_limit(kernel: Kernel, allocation: str) -> None:
    task = with_limits(FAST, memory_mb=512, act_seconds=5.0)
    source = policy_with_act(f"self.hoard = {allocation}\nreturn 0", top="import numpy")
    summary = kernel.hostile(source, task).episodes[0]
    assert_failed(summary, Failure.RESOURCE_LIMIT)
    assert "memory limit" in (summary.message or "")


def test_a_memory_error_while_starting_is_a_resource_limit(kernel: Kernel) -> None:
    task = with_limits(FAST, memory_mb=512)
    summary = kernel.only(
        "HOARD = bytearray(8 << 30)\n\ndef make_policy(context):\n    pass\n", task
    )
    assert_failed(summary, Failure.RESOURCE_LIMIT)
    assert "while starting" in (summary.message or "")


def test_a_policy_cannot_lift_its_own_limits(kernel: Kernel) -> None:
    source = policy_with_act(
        """\
        for which in (resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_NOFILE):
            try:
                resource.setrlimit(which, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
                print("lifted", which)
            except (ValueError, OSError):
                print("kept", which)
        print("queued signals", resource.getrlimit(resource.RLIMIT_SIGPENDING))
        return 0
        """,
        top="import resource",
    )
    summary = kernel.only(source, with_limits(FAST, memory_mb=512))
    assert summary.status == "ok", summary
    assert "lifted" not in (summary.stderr or ""), summary.stderr
    assert (summary.stderr or "").count("kept") >= 3
    # The pending-signal count is the uid's: left alone, a policy could fill it for the server.
    pending = limits.SIGNALS_PENDING
    assert f"queued signals ({pending}, {pending})" in (summary.stderr or ""), summary.stderr


def test_a_busy_loop_is_killed_by_the_cpu_limit(kernel: Kernel) -> None:
    task = with_limits("cartpole", cpu_seconds=1, act_seconds=30.0, episode_seconds=30.0)
    summary = kernel.hostile(policy_with_act("while True:\n    pass"), task).episodes[0]
    assert_failed(summary, Failure.RESOURCE_LIMIT)
    assert "CPU" in (summary.message or "")
    assert summary.seconds < 10.0


def test_a_10_gb_file_is_stopped_by_the_file_size_limit_and_the_next_episode_runs(
    kernel: Kernel,
) -> None:
    # Writes in 8 MB chunks toward 10 GB; the 64 MB per-file limit kills it long before.
    source = policy_with_act(
        "chunk = b'x' * (8 << 20)\n"
        "with open('big', 'wb') as f:\n"
        "    for _ in range(1280):\n"
        "        f.write(chunk)\n"
        "return 0",
    )
    task = with_limits("cartpole", act_seconds=30.0, episode_seconds=60.0)
    episodes = kernel.hostile(source, task, 2).episodes
    for summary in episodes:
        assert_failed(summary, Failure.RESOURCE_LIMIT)
        assert "file-size" in (summary.message or "")
    # Each episode started in an empty directory and hit the limit on its own.
    assert [e.steps for e in episodes] == [0, 0]


# -- invalid_action ----------------------------------------------------------


def test_an_object_is_not_an_action(kernel: Kernel) -> None:
    summary = kernel.only(policy_with_act("return object()"), FAST)
    assert_failed(summary, Failure.INVALID_ACTION)
    assert "not an action" in (summary.message or "")
    assert summary.steps == 0


@pytest.mark.parametrize("task_id", ["pendulum", "mountaincar-continuous"])
def test_nan_for_a_continuous_task_is_an_invalid_action(kernel: Kernel, task_id: str) -> None:
    source = policy_with_act("return [float('nan')]")
    summary = kernel.only(source, with_limits(task_id, act_seconds=0.5))
    assert_failed(summary, Failure.INVALID_ACTION)
    assert "not finite" in (summary.message or "")
    assert summary.steps == 0


@pytest.mark.parametrize(
    ("task_id", "bad", "says"),
    [
        ("cartpole", "2", "expected an int in [0, 1], got 2"),
        ("cartpole", "-1", "expected an int in [0, 1], got -1"),
        ("pendulum", "[2.5]", "above high 2"),
        ("mountaincar-continuous", "[-1.01]", "below low -1"),
    ],
)
def test_an_out_of_range_action_ends_the_episode_and_is_never_clipped(
    kernel: Kernel, task_id: str, bad: str, says: str
) -> None:
    good = "[0.0]" if task_id != "cartpole" else "0"
    source = policy_with_act(
        f"self.steps += 1\nreturn {bad} if self.steps == 6 else {good}", init="self.steps = 0"
    )
    summary = kernel.only(source, with_limits(task_id, act_seconds=0.5))
    assert_failed(summary, Failure.INVALID_ACTION)
    assert summary.steps == 5, "the bad sixth action must not have been applied"
    assert (summary.message or "").startswith("step 5: action")
    assert says in (summary.message or "")


# -- output ------------------------------------------------------------------


def test_garbage_printed_to_stdout_is_captured_and_the_episode_stays_ok(kernel: Kernel) -> None:
    noisy = policy_with_act(
        """\
        # Bytes that look like frames must not reach the protocol.
        os.write(1, struct.pack("<IB", 5, ord("A")) + b"\\x00garbage\\xff\\n")
        print("step", self.steps, "\\x00\\x01 looks like a frame", flush=True)
        sys.stdout.buffer.write(b"\\xfe\\xfd raw bytes\\n")
        sys.stdout.flush()
        print("to stderr", file=sys.stderr)
        self.steps += 1
        return 1 if observation[2] > 0 else 0
        """,
        top="import os, struct, sys",
        init="self.steps = 0",
    )
    quiet = policy_with_act("return 1 if observation[2] > 0 else 0")
    loud, calm = kernel.evaluate(noisy, FAST, 2), kernel.evaluate(quiet, FAST, 2)
    for summary, reference in zip(loud.episodes, calm.episodes, strict=True):
        assert summary.status == "ok", summary
        assert (summary.steps, summary.episode_return) == (
            reference.steps,
            reference.episode_return,
        )
        assert summary.stderr is not None
        assert "looks like a frame" in summary.stderr and "to stderr" in summary.stderr
        assert f"step {summary.steps - 1} " in summary.stderr  # the tail is kept
        assert reference.stderr is None


@pytest.mark.parametrize("workers", [1, 2])
def test_fifty_megabytes_of_stderr_are_drained_and_bounded(kernel: Kernel, workers: int) -> None:
    source = policy_with_act(
        """\
        if not self.done:
            sys.stderr.write("x" * (50 << 20))
            sys.stderr.write("THE END\\n")
            self.done = True
        return 1 if observation[2] > 0 else 0
        """,
        top="import sys",
        init="self.done = False",
    )
    task = with_limits("cartpole", act_seconds=20.0, episode_seconds=30.0)
    for summary in kernel.evaluate(source, task, workers, workers=workers).episodes:
        assert summary.status == "ok", summary
        assert summary.steps > 10
        assert summary.stderr is not None
        assert len(summary.stderr) <= STDERR_CHARS + 100
        assert "THE END" in summary.stderr


# -- crashed -----------------------------------------------------------------


def test_os_exit_is_a_crash_with_its_exit_code(kernel: Kernel) -> None:
    summary = kernel.only(policy_with_act("os._exit(3)", top="import os"), FAST)
    assert_failed(summary, Failure.CRASHED)
    assert "exited with code 3" in (summary.message or "")


@pytest.mark.parametrize(
    "how",
    ["os.kill(os.getpid(), signal.SIGSEGV)", "ctypes.string_at(0)"],
    ids=["signal", "null-pointer"],
)
def test_a_segfault_is_a_crash(kernel: Kernel, how: str) -> None:
    source = policy_with_act(f"print('about to crash', flush=True)\n{how}", top=IMPORTS)
    summary = kernel.only(source, FAST)
    assert_failed(summary, Failure.CRASHED)
    assert "SIGSEGV" in (summary.message or "")
    assert "about to crash" in (summary.stderr or "")


# -- protocol_error ----------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        'b"hello host, this is not a frame"',
        'struct.pack("<IB", 3, ord("A")) + b"Zz"',  # unknown value tag
        'struct.pack("<IB", 11, ord("A")) + b"i" + bytes(8) + b"!"',  # trailing byte
        'struct.pack("<IB", 10, ord("Q")) + b"i" + bytes(8)',  # a kind the host never uses
        'struct.pack("<IB", 2, ord("R")) + b"N"',  # READY where an ACTION belongs
    ],
    ids=["text", "bad-tag", "trailing", "unknown-kind", "wrong-kind"],
)
def test_garbage_written_to_the_action_descriptor_is_a_protocol_error(
    kernel: Kernel, payload: str
) -> None:
    source = policy_with_act(f"os.write(4, {payload})\ntime.sleep(30)", top=IMPORTS)
    summary = kernel.hostile(source, with_limits(FAST, act_seconds=5.0)).episodes[0]
    assert_failed(summary, Failure.PROTOCOL_ERROR)
    assert summary.seconds < 4.0, "a bad frame ends the episode at once, not at the deadline"


def test_a_huge_frame_header_is_rejected_without_waiting_for_its_payload(kernel: Kernel) -> None:
    source = policy_with_act(
        'os.write(4, struct.pack("<IB", 2**31, ord("A")))\ntime.sleep(30)', top=IMPORTS
    )
    summary = kernel.hostile(source, with_limits(FAST, act_seconds=5.0)).episodes[0]
    assert_failed(summary, Failure.PROTOCOL_ERROR)
    assert "exceeds the limit" in (summary.message or "")
    assert summary.seconds < 4.0


def test_an_oversized_action_is_a_protocol_error(kernel: Kernel) -> None:
    source = policy_with_act("return numpy.zeros(500_000)", top="import numpy")
    summary = kernel.hostile(source, FAST).episodes[0]
    assert_failed(summary, Failure.PROTOCOL_ERROR)
    assert "exceeds the limit" in (summary.message or "")


def test_a_truncated_array_frame_is_a_protocol_error(kernel: Kernel) -> None:
    source = policy_with_act(
        'os.write(4, struct.pack("<IB", 5, ord("A")) + b"a\\xff\\x00\\x00")\ntime.sleep(30)',
        top=IMPORTS,
    )
    summary = kernel.hostile(source, FAST).episodes[0]
    assert_failed(summary, Failure.PROTOCOL_ERROR)


def test_closing_the_action_descriptor_and_spinning_is_a_protocol_error(kernel: Kernel) -> None:
    source = policy_with_act("os.close(4)\nwhile True:\n    pass", top=IMPORTS)
    summary = kernel.hostile(source, with_limits(FAST, act_seconds=5.0)).episodes[0]
    assert_failed(summary, Failure.PROTOCOL_ERROR)
    assert "closed its action pipe" in (summary.message or "")
    assert summary.seconds < 4.0
