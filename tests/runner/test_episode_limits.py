"""An episode's own disk, memory and processes: its scratch quota, its memory cgroup and
its process group, each filled or exceeded by a real policy through the real runner.

What one episode does to its share leaves the next and any concurrent episode
theirs. A test whose layer this machine lacks is skipped with the reason
:func:`evopolicy_mcp.kernel.sandbox.probe` gives.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from evopolicy_mcp.evaluation.feedback import EpisodeSummary
from evopolicy_mcp.kernel import cgroups
from evopolicy_mcp.kernel.confine import ProcessLimits
from evopolicy_mcp.kernel.scratch import MAX_PENDING, TIDIER_NAME, Tidier
from evopolicy_mcp.kernel.zygote import SPARES
from evopolicy_mcp.runner.template import Failure, PolicyFailure
from tests.support.kernel import (
    GOOD_CARTPOLE,
    Kernel,
    assert_failed,
    children_of,
    needs,
    strays_of,
    with_limits,
)

FAST = with_limits("cartpole", act_seconds=0.5, startup_seconds=5.0, episode_seconds=10.0)

QUOTA = ProcessLimits()
# Fills its scratch directory with 1 MiB files, then with empty ones, each loop bounded at
# twice the quota should the quota not hold; reports what it made, the errno that stopped
# it and how much free space /tmp (the machine's disk) lost meanwhile; frees a file and
# writes again.
FILL = f"""\
import os, time

QUOTA, FILES = {QUOTA.disk_bytes}, {QUOTA.disk_files}


def fill(size, count, catch):
    made = written = 0
    try:
        for n in range(count):
            fd = os.open(f"fill-{{size}}-{{n}}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            made += 1
            try:
                data = memoryview(b"x" * size)
                while data:
                    done = os.write(fd, data)
                    written += done
                    data = data[done:]
            finally:
                os.close(fd)
    except OSError as exc:
        if not catch:
            raise
        return made, written, exc.errno
    return made, written, None


def fill_scratch(catch=True):
    before = os.statvfs("/tmp")
    print("BYTES", *fill(1 << 20, 2 * QUOTA >> 20, catch), flush=True)
    print("FILES", *fill(0, 2 * FILES, catch), flush=True)
    print("DROP", (before.f_bavail - os.statvfs("/tmp").f_bavail) * before.f_frsize, flush=True)
    os.remove(f"fill-{{1 << 20}}-0")
    print("RECOVERED", fill(1000, 1, catch)[1] == 1000, flush=True)
    print("FULL", time.time(), flush=True)
"""


def filler(make_policy: str) -> str:
    """A CartPole controller whose make_policy runs ``make_policy`` first."""
    return f"{FILL}\n{GOOD_CARTPOLE}\n" + (
        f"def make_policy(context):\n    {make_policy}\n    return Controller()\n"
    )


def fill_report(output: EpisodeSummary | str) -> dict[str, list[str]]:
    """The reports of FILL by their first word, from a summary's output or a process's."""
    text = output if isinstance(output, str) else output.stderr or ""
    lines = [line.split() for line in text.splitlines()]
    return {line[0]: line[1:] for line in lines if line and line[0].isupper()}


def scratch_mounts(pid: int) -> list[str]:
    """Mount points of the episodes' scratch tmpfs mounts as the process ``pid`` sees them
    (below the scratch root, itself a tmpfs of directories only)."""
    with open(f"/proc/{pid}/mountinfo") as f:
        found = [line.split() for line in f if " - tmpfs " in line]
    return [fields[4] for fields in found if re.search(r"/evopolicy-scratch-[^/]+/", fields[4])]


@needs("disk")
def test_filling_the_scratch_directory_ends_at_its_quota_for_that_episode_alone(
    kernel: Kernel,
) -> None:
    fill_only = with_limits(FAST, startup_seconds=10.0)
    feedback = kernel.hostile(filler("fill_scratch()"), fill_only, 2)
    for summary in feedback.episodes:  # a harmless no-op: the episode goes on as normal
        assert (summary.status, summary.episode_return) == ("ok", 500.0), summary
        found = fill_report(summary)
        made, written, stopped = map(int, found["BYTES"])
        assert stopped == errno.ENOSPC
        assert QUOTA.disk_bytes - (1 << 20) < written <= QUOTA.disk_bytes, written
        files, _, stopped = map(int, found["FILES"])
        assert stopped == errno.ENOSPC
        # The program's copy and the directories take the rest of the files.
        assert QUOTA.disk_files - 16 <= made + files < QUOTA.disk_files, (made, files)
        assert int(found["DROP"][0]) < QUOTA.disk_bytes // 2, "the writes reached the disk"
        assert found["RECOVERED"] == ["True"]
    # The second episode had the whole quota again: the first one's files were gone.
    assert fill_report(feedback.episodes[0])["BYTES"] == fill_report(feedback.episodes[1])["BYTES"]
    unwise = kernel.hostile(filler("fill_scratch(catch=False)"), fill_only).episodes[0]
    assert_failed(unwise, Failure.EXCEPTION)
    assert "No space left on device" in (unwise.message or ""), unwise
    kernel.own_runner().settle()
    template = kernel.own_runner().template_pid
    assert template is not None
    # Ended episodes' scratch goes once the template is idle (a few ms): only the spares' stay.
    deadline = time.monotonic() + 5.0
    while len(scratch_mounts(template)) > SPARES and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(scratch_mounts(template)) <= SPARES, "only the idle spares' scratch is mounted"
    assert scratch_mounts(os.getpid()) == [], "the machine's mount table never shows them"


WRITER = """\
import os, time

def make_policy(context):
    with open("notes.bin", "wb") as f:
        f.write(bytes(32 << 20))
    print("WROTE", time.time(), os.path.getsize("notes.bin"), flush=True)
    return Controller()
"""


@needs("disk")
def test_a_full_scratch_directory_leaves_a_concurrent_episode_its_own(kernel: Kernel) -> None:
    kernel.own_runner()  # two episodes at once on one runner's scratch
    fills: list[EpisodeSummary] = []
    hostile = threading.Thread(
        target=lambda: fills.extend(
            kernel.evaluate(
                filler("fill_scratch()\n    time.sleep(0.6)"),
                with_limits(FAST, startup_seconds=10.0),
                2,
            ).episodes
        )
    )
    hostile.start()
    writes: list[EpisodeSummary] = []
    try:
        while hostile.is_alive() or not writes:
            writes += kernel.evaluate(GOOD_CARTPOLE + WRITER, "cartpole", 1).episodes
    finally:
        hostile.join()
    assert [s.status for s in fills] == ["ok", "ok"], fills
    for summary in writes:
        assert (summary.status, summary.episode_return) == ("ok", 500.0), summary
        assert fill_report(summary)["WROTE"][1] == str(32 << 20)
    full = [float(fill_report(s)["FULL"][0]) for s in fills]
    wrote = [float(fill_report(s)["WROTE"][0]) for s in writes]
    assert any(f <= w <= f + 0.6 for f in full for w in wrote), "no write met a full neighbour"


def tidier_of(template: int) -> int:
    tidiers = [pid for pid in children_of(template) if comm(pid) == TIDIER_NAME]
    assert len(tidiers) == 1, tidiers
    return tidiers[0]


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def test_the_tidier_holds_only_its_two_pipes(kernel: Kernel) -> None:
    kernel.assert_healthy()
    template = kernel.own_runner().template_pid
    assert template is not None
    tidier = tidier_of(template)
    # While it removes an ended episode's scratch it holds that directory open for a
    # moment: look until it is idle. A descriptor it keeps shows in every look.
    for _ in range(100):
        fds = {}
        for fd in os.listdir(f"/proc/{tidier}/fd"):
            try:
                fds[int(fd)] = os.readlink(f"/proc/{tidier}/fd/{fd}")
            except FileNotFoundError:
                pass  # closed since the listing
        extra = {fd: target for fd, target in fds.items() if fd > 2}
        if len(extra) == 2:
            break
        time.sleep(0.02)
    # Not the control socket, no episode's pipes: only its work in and its answers out.
    assert sorted(extra.values()) == sorted(v for v in extra.values() if v.startswith("pipe:"))
    assert len(extra) == 2, fds


def scratch_dirs(root: Path, count: int) -> list[str]:
    made = []
    for n in range(count):
        (root / str(n)).mkdir()
        (root / str(n) / "work").write_text("x")
        made.append(str(root / str(n)))
    return made


def test_the_tidier_never_holds_the_template_up_and_never_falls_behind_unbounded(
    tmp_path: Path,
) -> None:
    # Its answers are read only now and then; the template must never block on it.
    tidier = Tidier(mounted=False)
    given = scratch_dirs(tmp_path, 3000)
    done = threading.Event()

    def put_all() -> None:
        for path in given:
            tidier.put(path, None)
            assert len(tidier.pending) <= MAX_PENDING
        done.set()

    worker = threading.Thread(target=put_all, daemon=True)
    worker.start()
    assert done.wait(20), "the template blocked handing scratch to its tidier"
    tidier.close()
    tidier.close()  # a second close (a shutdown interrupted by a signal) does nothing
    assert tidier.pid is None and not tidier.pending
    assert list(tmp_path.iterdir()) == [], "every scratch was removed, by one or the other"


def test_a_stopped_tidier_holds_up_neither_the_template_nor_its_shutdown(tmp_path: Path) -> None:
    tidier = Tidier(mounted=False)
    pid = tidier.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        for path in scratch_dirs(tmp_path, 50):
            tidier.put(path, None)  # the first few wait for it; the rest are done at once
        closing = threading.Thread(target=tidier.close, kwargs={"timeout": 0.5}, daemon=True)
        closing.start()
        closing.join(10)
        assert not closing.is_alive(), "the shutdown waited for a stopped tidier"
        assert tidier.pid is None and list(tmp_path.iterdir()) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# A template whose shutdown (the host's end, say) is interrupted by a SIGTERM (the
# parent-death signal that follows it): the shutdown under way must finish, cleanly.
INTERRUPTED_SHUTDOWN = """
import os, signal, socket, sys, tempfile, threading
from evopolicy_mcp.kernel.zygote import Template
ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
root = tempfile.mkdtemp(prefix="evopolicy-scratch-", dir=sys.argv[1])
template = Template(ours, root)
signal.signal(signal.SIGTERM, lambda *_: template.shutdown())  # as serve() does
ended = os.path.join(root, "ended")
os.mkdir(ended)
for n in range(20000):  # slow to remove: the signal comes while the tidier works
    open(os.path.join(ended, str(n)), "w").close()
template.tidier.put(ended, None)
threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGTERM)).start()
template.shutdown()
"""


def test_a_signal_during_the_templates_shutdown_lets_it_finish(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_SHUTDOWN, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.iterdir()) == [], "the scratch root is removed"


def test_a_dead_tidier_is_forgotten_once_reaped(tmp_path: Path) -> None:
    tidier = Tidier(mounted=False)
    pid = tidier.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    tidier.reaped(pid)  # what the template's reap does: its pid may now be anyone's
    assert tidier.pid is None
    (path,) = scratch_dirs(tmp_path, 1)
    tidier.put(path, None)
    assert list(tmp_path.iterdir()) == []
    tidier.close()


@needs("disk")
def test_without_its_tidier_the_template_frees_scratch_itself_and_keeps_serving(
    tmp_path: Path,
) -> None:
    kernel = Kernel(tmp_path)
    try:
        kernel.assert_healthy()
        template = kernel.runner.template_pid
        assert template is not None
        os.kill(tidier_of(template), signal.SIGKILL)
        for _ in range(6):
            kernel.assert_healthy()
        kernel.runner.settle()
        deadline = time.monotonic() + 5.0
        while len(scratch_mounts(template)) > SPARES and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(scratch_mounts(template)) <= SPARES, scratch_mounts(template)
        assert strays_of(template) == [], "the dead tidier was reaped"
    finally:
        kernel.close()


@needs("disk")
def test_the_scratch_quota_is_the_one_the_episode_limits_give(kernel: Kernel) -> None:
    program = kernel.program(filler("fill_scratch()"))
    small = ProcessLimits(disk_bytes=4 << 20, disk_files=64)
    written = []
    # Each spare has the quota of the episodes before it was forked: the first of each
    # pair is a change from that of the spares in stock, the second may not be.
    sequence = (small, small, ProcessLimits(), ProcessLimits(), small)
    for limits in sequence:
        with kernel.own_runner().open(
            program.path, limits, act_seconds=5.0, startup_seconds=10.0, episode_seconds=30.0
        ) as proc:
            proc.start({"task_id": "fill", "observation_space": {}, "action_space": {}})
        found = fill_report(proc.output())
        written.append((int(found["BYTES"][1]), int(found["BYTES"][0]) + int(found["FILES"][0])))
    assert written[0] == written[1] == written[4]
    for (size, files), limits in zip(written, sequence, strict=True):
        assert limits.disk_bytes - (1 << 20) < size <= limits.disk_bytes, (size, limits)
        assert limits.disk_files - 16 <= files < limits.disk_files, (files, limits)


# Holds memfds of 64 MiB each, written through, up to 2 GiB (bounded on purpose should the
# limit not hold); first it writes ``SCRATCH`` MiB to its scratch tmpfs.
HOG = """\
import mmap, os

SCRATCH = {scratch}

def make_policy(context):
    for n in range(SCRATCH // 32):  # files of 32 MiB: RLIMIT_FSIZE is 64 MiB
        with open(f"scratch-{{n}}.bin", "wb") as f:
            f.write(b"s" * (32 << 20))
    print("SCRATCH", SCRATCH, flush=True)
    held = []
    for n in range(32):
        fd = os.memfd_create("hog")
        os.ftruncate(fd, 64 << 20)
        with mmap.mmap(fd, 64 << 20) as m:
            m.write(b"x" * (64 << 20))
        held.append(fd)
        print("HELD", (n + 1) * 64, flush=True)
    return Policy()

class Policy:
    def act(self, observation):
        return 0
"""


def hog(scratch_mib: int = 0) -> str:
    return HOG.format(scratch=scratch_mib)


def held_mib(output: EpisodeSummary | str) -> int:
    return max([0, *(int(n) for n in fill_report(output).get("HELD", []))])


@needs("memory")
def test_memfd_contents_beyond_the_memory_limit_end_the_episode_as_resource_limit(
    kernel: Kernel,
) -> None:
    # 256 MiB of address space (+ the 256 MiB scratch quota): RLIMIT_AS alone let it hold 2 GiB.
    small = with_limits(FAST, memory_mb=256, startup_seconds=20.0)
    summary = kernel.hostile(hog(), small).episodes[0]
    assert_failed(summary, Failure.RESOURCE_LIMIT)
    assert "memory limit" in (summary.message or ""), summary
    limit = cgroups.memory_limit(ProcessLimits(memory_bytes=256 << 20)) >> 20
    assert 64 <= held_mib(summary) < limit, summary.stderr


@needs("memory", "disk")
def test_scratch_files_count_towards_the_memory_limit(kernel: Kernel) -> None:
    limits = ProcessLimits(memory_bytes=256 << 20, disk_bytes=256 << 20)
    program = kernel.program(hog(scratch_mib=192))
    with (
        kernel.own_runner().open(
            program.path, limits, act_seconds=5.0, startup_seconds=20.0, episode_seconds=30.0
        ) as proc,
        pytest.raises(PolicyFailure) as failed,
    ):
        proc.start({"task_id": "hog", "observation_space": {}, "action_space": {}})
    assert failed.value.code == Failure.RESOURCE_LIMIT, (failed.value, proc.output())
    found = fill_report(proc.output())
    assert found["SCRATCH"] == ["192"], found
    # memfds and the scratch file share the limit (alone the memfds reach about 384 MiB)
    assert 192 + held_mib(proc.output()) < cgroups.memory_limit(limits) >> 20, found
    kernel.assert_healthy()


CHILD_OOM = """\
import os

def make_policy(context):
    return Policy()

class Policy:
    def act(self, observation):
        self.held = b"\x01" * (250 << 20)  # the leader holds half the episode's memory
        pid = os.fork()
        if pid == 0:  # a child allocates until the episode's memory limit kills it
            self.held = None  # out of its own address space (its limit counts it)
            chunks = []
            try:
                while True:
                    chunks.append(b"\\x02" * (8 << 20))
            except MemoryError:
                os._exit(3)  # the address-space limit came first: not what this tests
        _pid, status = os.waitpid(pid, 0)
        print("CHILD", status, flush=True)
        os._exit(1)  # the leader dies of it in its own way
"""


@needs("memory")
def test_a_child_killed_by_the_memory_limit_makes_the_episode_a_resource_limit(
    kernel: Kernel,
) -> None:
    limits = ProcessLimits(memory_bytes=512 << 20, disk_bytes=16 << 20)
    program = kernel.program(CHILD_OOM)
    with (
        kernel.own_runner().open(
            program.path, limits, act_seconds=20.0, startup_seconds=20.0, episode_seconds=30.0
        ) as proc,
        pytest.raises(PolicyFailure) as failed,
    ):
        proc.start({"task_id": "oom", "observation_space": {}, "action_space": {}})
        proc.act(0)
    assert fill_report(proc.output())["CHILD"] == [str(signal.SIGKILL)], proc.output()
    assert failed.value.code == Failure.RESOURCE_LIMIT, failed.value
    assert "memory limit" in failed.value.message
    kernel.assert_healthy()


EXIT_IN_ACT = """\
import os

def make_policy(context):
    return Policy()

class Policy:
    def act(self, observation):
        os._exit(1)
"""
# Prints the policy's memory cgroup ("GROUP <path>") as make_policy runs.
SAY_GROUP = """\
def make_policy(context):
    lines = open("/proc/self/cgroup").read().splitlines()
    memory = [x for x in lines if ":memory:" in x] or [x for x in lines if x.startswith("0::")]
    print("GROUP", memory[0].split(":", 2)[2], flush=True)
    return _make_policy(context)
"""


@needs("memory")
def test_an_episode_in_a_reused_group_is_not_charged_with_an_earlier_oom_kill(
    tmp_path: Any,
) -> None:
    """Groups of ended episodes are emptied and given to later spares: the OOM kill of an
    earlier episode must not make a later one in the same group a resource_limit."""
    kernel = Kernel(tmp_path)
    limits = ProcessLimits(memory_bytes=512 << 20, disk_bytes=16 << 20)

    def failure_of(source: str) -> tuple[PolicyFailure, str]:
        """The episode's failure and the memory cgroup it ran in."""
        source = source.replace("def make_policy(", "def _make_policy(") + SAY_GROUP
        with (
            kernel.runner.open(
                kernel.program(source).path,
                limits,
                act_seconds=20.0,
                startup_seconds=20.0,
                episode_seconds=30.0,
            ) as proc,
            pytest.raises(PolicyFailure) as failed,
        ):
            proc.start({"task_id": "oom", "observation_space": {}, "action_space": {}})
            proc.act(0)
        kernel.runner.settle()
        time.sleep(0.2)  # the template, idle, frees the group for the next spares
        return failed.value, fill_report(proc.output())["GROUP"][0]

    try:
        failure, oom_group = failure_of(CHILD_OOM)
        assert failure.code == Failure.RESOURCE_LIMIT, failure
        # The spare forked with the OOM episode's spawn had a group already: the group
        # comes back by the third episode, whichever of the next ones it reaches.
        groups = []
        for _ in range(3):
            failure, group = failure_of(EXIT_IN_ACT)
            assert failure.code == Failure.CRASHED, failure
            assert "code 1" in failure.message, failure
            groups.append(group)
        assert oom_group in groups, f"the OOM episode's group {oom_group} was not reused: {groups}"
        kernel.assert_healthy()
    finally:
        kernel.close()


DAEMON = """\
import os, time

def make_policy(context):
    return Policy()

class Policy:
    def act(self, observation):
        if observation == "daemon":  # a grandchild the template inherits, answering later
            r, w = os.pipe()
            if os.fork() == 0:
                if os.fork() == 0:
                    os.close(r)
                    time.sleep(1.5)
                    os.write(w, b"survived")
                    os._exit(0)
                os._exit(0)
            os.wait()
            os.close(w)
            self.r = r
            return 0
        if observation == "collect":
            return os.read(self.r, 100).decode() or "gone"
        return 0
"""


@needs("processes")
def test_an_ending_episode_kills_its_own_leftovers_and_not_a_running_one_s(
    kernel: Kernel,
) -> None:
    program = kernel.program(DAEMON)

    def open_episode() -> Any:
        return kernel.own_runner().open(
            program.path,
            ProcessLimits(),
            act_seconds=10.0,
            startup_seconds=20.0,
            episode_seconds=30.0,
        )

    context = {"task_id": "daemon", "observation_space": {}, "action_space": {}}
    with open_episode() as running:
        running.start(context)
        running.act("daemon")  # its grandchild is now the template's child
        with open_episode() as other:  # another episode starts and ends meanwhile
            other.start(context)
            other.act("daemon")
        # The other episode is reaped well before the grandchild answers (1.5 s).
        assert running.act("collect") == "survived"
    kernel.own_runner().settle()
    template = kernel.own_runner().template_pid
    assert template is not None
    deadline = time.monotonic() + 5.0
    while strays_of(template) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert strays_of(template) == [], "both episodes' grandchildren went with them"
