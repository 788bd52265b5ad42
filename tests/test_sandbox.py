"""The sandbox of policy processes, attacked by real policies through the real runner.

Each policy tries what it must not, catches what the sandbox answers and
prints a verdict per attempt (never what it read); the test reads the
verdicts from the captured output and checks the host side too: the files,
the listener, the feedback. A test whose layer this machine lacks is skipped
with the reason :func:`evopolicy_mcp.sandbox.probe` gives.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import socket
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kernel_support import (
    GOOD_CARTPOLE,
    Kernel,
    assert_failed,
    policy_with_act,
    strays_of,
    with_limits,
)

from evopolicy_mcp import cgroups, linux, sandbox
from evopolicy_mcp.confine import ProcessLimits
from evopolicy_mcp.evaluation import evaluate
from evopolicy_mcp.feedback import EpisodeSummary
from evopolicy_mcp.runner import Failure, PolicyFailure
from evopolicy_mcp.snapshot import capture_files
from evopolicy_mcp.store import DB_NAME, Store

PROBE = sandbox.probe()
FAST = with_limits("cartpole", act_seconds=0.5, startup_seconds=5.0, episode_seconds=10.0)

# Prepended to every attacking policy: one verdict line per attempt.
ATTEMPT = """\
import os, socket, sys

def attempt(name, action):
    try:
        result = action()
    except Exception as exc:
        print(name, "=> denied", type(exc).__name__, flush=True)
    else:
        print(name, "=> ALLOWED", repr(result)[:300], flush=True)
"""


def needs(*layers: str) -> pytest.MarkDecorator:
    missing = [PROBE.layers[name] for name in layers if not PROBE.layers[name].available]
    reason = "; ".join(f"{layer.name} layer unavailable here: {layer.detail}" for layer in missing)
    return pytest.mark.skipif(bool(missing), reason=reason)


def attacker(attempts: str, *, top: str = "") -> str:
    """A policy that makes ``attempts`` (``attempt(...)`` lines) when built, then acts 0."""
    return policy_with_act("return 0", top=ATTEMPT + top, init=attempts)


def verdicts(summary: EpisodeSummary) -> dict[str, str]:
    assert summary.status == "ok", summary
    found = {}
    for line in (summary.stderr or "").splitlines():
        if " => " in line:
            name, verdict = line.split(" => ", 1)
            found[name] = verdict
    return found


def assert_all_denied(found: dict[str, str], names: list[str]) -> None:
    assert set(names) <= set(found), (names, found)
    allowed = {name: found[name] for name in names if not found[name].startswith("denied")}
    assert allowed == {}, allowed


@needs("filesystem")
def test_a_policy_cannot_read_a_secret_file_outside_its_sandbox(
    kernel: Kernel, tmp_path: Path
) -> None:
    secret = f"SECRET-{uuid.uuid4().hex}"
    (tmp_path / "secret.txt").write_text(secret)
    source = attacker(
        """\
        attempt("read", lambda: open(PATH).read())
        attempt("list", lambda: os.listdir(os.path.dirname(PATH)))
        attempt("read through /proc/self/root", lambda: open("/proc/self/root" + PATH).read())
        attempt("read the home directory", lambda: os.listdir(os.path.expanduser("~")))
        """,
        top=f"PATH = {str(tmp_path / 'secret.txt')!r}",
    )
    feedback = kernel.evaluate(source, FAST, 1)
    found = verdicts(feedback.episodes[0])
    assert_all_denied(found, ["read", "list", "read through /proc/self/root"])
    assert found["read"] == "denied PermissionError"
    assert secret not in feedback.model_dump_json()


@needs("filesystem")
def test_a_policy_cannot_list_or_read_the_records_or_other_programs(
    kernel: Kernel, tmp_path: Path
) -> None:
    store = Store(tmp_path / "data")  # real records: the SQLite file the run secret lives in
    other = capture_files({"policy.py": "# OTHER-PROGRAM\n"}, store.programs_dir)
    program = capture_files(
        {
            "policy.py": attacker(
                """\
                attempt("list the data directory", lambda: os.listdir(DATA))
                attempt("read the database", lambda: open(os.path.join(DATA, DB), "rb").read(64))
                attempt("query the database", lambda: sqlite3.connect(
                    f"file:{os.path.join(DATA, DB)}?mode=ro", uri=True
                ).execute("select name from sqlite_master").fetchall())
                attempt("list the programs", lambda: os.listdir(os.path.dirname(HERE)))
                attempt("read another program", lambda: open(OTHER).read())
                attempt("list its own program", lambda: sorted(os.listdir(HERE)))
                """,
                top=(
                    "import sqlite3\n"
                    "HERE = os.path.dirname(os.path.abspath(__file__))\n"
                    "DATA = os.path.dirname(os.path.dirname(HERE))\n"
                    f"DB = {DB_NAME!r}\n"
                    f"OTHER = {str(other.path / 'policy.py')!r}\n"
                ),
            )
        },
        store.programs_dir,
    )
    assert (store.data_dir / DB_NAME).is_file() and program.path.parent.parent == store.data_dir
    feedback = evaluate(program, FAST, kernel.jobs(FAST, 1), runner=kernel.runner, workers=1)
    found = verdicts(feedback.episodes[0])
    denied = ["list the data directory", "read the database", "query the database"]
    assert_all_denied(found, [*denied, "list the programs", "read another program"])
    assert found["list its own program"] == "ALLOWED ['policy.py']"
    assert "OTHER-PROGRAM" not in feedback.model_dump_json()


@needs("network")
def test_a_policy_cannot_reach_a_listener_on_localhost(kernel: Kernel) -> None:
    with (
        socket.create_server(("127.0.0.1", 0)) as listener,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp,
    ):
        udp.bind(("127.0.0.1", 0))
        source = attacker(
            """\
            attempt("tcp", lambda: socket.create_connection(("127.0.0.1", TCP), timeout=1))
            attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(
                b"x", ("127.0.0.1", UDP)))
            attempt("unix", lambda: socket.socket(socket.AF_UNIX).connect("/run/dbus/system_bus_socket"))
            attempt("socketpair", lambda: len(socket.socketpair()))
            """,
            top=f"TCP, UDP = {listener.getsockname()[1]}, {udp.getsockname()[1]}",
        )
        found = verdicts(kernel.only(source, FAST))
        assert_all_denied(found, ["tcp", "udp", "unix"])
        assert found["socketpair"] == "ALLOWED 2"
        listener.setblocking(False)
        udp.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # the listener saw no connection
        with pytest.raises(BlockingIOError):
            udp.recv(16)


@needs("filesystem")
def test_each_episode_gets_a_private_scratch_directory_it_can_read_and_write(
    kernel: Kernel,
) -> None:
    source = attacker(
        """\
        attempt("start", lambda: os.listdir("."))
        attempt("write", lambda: open("notes.txt", "w").write("kept"))
        attempt("read", lambda: open("notes.txt").read())
        attempt("tree", lambda: (os.makedirs("a/b"), os.rename("notes.txt", "a/b/n.txt")))
        attempt("temp", lambda: os.path.basename(tempfile.mkstemp()[1]) != "")
        attempt("remove", lambda: (os.remove("a/b/n.txt"), os.removedirs("a/b")))
        attempt("numpy", lambda: numpy.save("array.npy", numpy.arange(3)))
        """,
        top="import numpy, tempfile",
    )
    feedback = kernel.evaluate(source, FAST, 2)
    for summary in feedback.episodes:
        found = verdicts(summary)
        assert found["start"] == "ALLOWED []", "every episode starts in an empty directory"
        assert found["read"] == "ALLOWED 'kept'"
        assert not [name for name, v in found.items() if not v.startswith("ALLOWED")], found


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
    """Mount points of scratch tmpfs mounts as the process ``pid`` sees them."""
    with open(f"/proc/{pid}/mountinfo") as f:
        found = [line.split() for line in f if " - tmpfs " in line]
    return [fields[4] for fields in found if "/evopolicy-scratch-" in fields[4]]


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
    kernel.runner.settle()
    template = kernel.runner.template_pid
    assert template is not None
    # Ended episodes' scratch goes once the template is idle (a few ms): only the spare's stays.
    deadline = time.monotonic() + 5.0
    while len(scratch_mounts(template)) > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(scratch_mounts(template)) <= 1, "only the idle spare's scratch is mounted"
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


@needs("disk")
def test_the_scratch_quota_is_the_one_the_episode_limits_give(kernel: Kernel) -> None:
    program = kernel.program(filler("fill_scratch()"))
    small = ProcessLimits(disk_bytes=4 << 20, disk_files=64)
    written = []
    for limits in (small, ProcessLimits(), small):  # each a change from the spare's quota
        with kernel.runner.open(
            program.path, limits, act_seconds=5.0, startup_seconds=10.0, episode_seconds=30.0
        ) as proc:
            proc.start({"task_id": "fill", "observation_space": {}, "action_space": {}})
        found = fill_report(proc.output())
        written.append((int(found["BYTES"][1]), int(found["BYTES"][0]) + int(found["FILES"][0])))
    assert written[0] == written[2]
    for (size, files), limits in zip(written, (small, ProcessLimits(), small), strict=True):
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
        kernel.runner.open(
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


@needs("filesystem", "syscalls")
def test_a_policy_cannot_change_anything_outside_its_scratch_directory(
    kernel: Kernel, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    victim.chmod(0o600)
    before = victim.stat()
    stray = f"/tmp/evopolicy-test-{uuid.uuid4().hex}"
    program = kernel.program(
        attacker(
            """\
            attempt("write its program", lambda: open(os.path.join(HERE, "x.py"), "w"))
            attempt("change its program", lambda: open(os.path.join(HERE, "policy.py"), "a"))
            attempt("write /tmp", lambda: open(STRAY, "w"))
            attempt("write beside the victim", lambda: open(VICTIM + ".new", "w"))
            attempt("append", lambda: open(VICTIM, "a").write("x"))
            attempt("truncate", lambda: os.truncate(VICTIM, 0))
            attempt("remove", lambda: os.remove(VICTIM))
            attempt("rename", lambda: os.rename(VICTIM, "stolen.txt"))
            attempt("link", lambda: os.link(VICTIM, "linked.txt"))
            attempt("chmod", lambda: os.chmod(VICTIM, 0o666))
            attempt("utime", lambda: os.utime(VICTIM, (0, 0)))
            attempt("xattr", lambda: os.setxattr(VICTIM, "user.x", b"1"))
            attempt("chown", lambda: os.chown(VICTIM, 1, 1))
            """,
            top=(
                "HERE = os.path.dirname(os.path.abspath(__file__))\n"
                f"STRAY, VICTIM = {stray!r}, {str(victim)!r}\n"
            ),
        )
    )
    files = sorted(p.name for p in program.path.iterdir())
    feedback = kernel.evaluate(program, FAST, 2)
    for summary in feedback.episodes:  # the second episode meets the same walls
        found = verdicts(summary)
        assert_all_denied(found, list(found))
    after = victim.stat()
    assert victim.read_text() == "original"
    assert (after.st_mode, after.st_uid, after.st_mtime_ns) == (
        before.st_mode,
        before.st_uid,
        before.st_mtime_ns,
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim.txt"]
    assert not os.path.exists(stray)
    assert sorted(p.name for p in program.path.iterdir()) == files


@needs("filesystem", "signals")
def test_a_policy_cannot_look_into_or_signal_the_host(kernel: Kernel) -> None:
    source = attacker(
        """\
        attempt("host environ", lambda: open(f"/proc/{HOST}/environ").read())
        attempt("host cmdline", lambda: open(f"/proc/{HOST}/cmdline").read())
        attempt("template cmdline", lambda: open(f"/proc/{os.getppid()}/cmdline").read())
        attempt("list processes", lambda: os.listdir("/proc"))
        attempt("signal the host", lambda: os.kill(HOST, signal.SIGURG))
        attempt("signal the template", lambda: os.kill(os.getppid(), signal.SIGURG))
        attempt("signal everyone", lambda: os.kill(-1, signal.SIGURG))
        attempt("signal the host's group", lambda: os.killpg(os.getpgid(HOST), signal.SIGURG))
        attempt("signal the template's group", lambda: os.killpg(
            os.getpgid(os.getppid()), signal.SIGURG))
        attempt("own status", lambda: "VmRSS" in open("/proc/self/status").read())
        """,
        top=f"import signal\nHOST = {os.getpid()}",
    )
    # SIGURG is ignored by default: harmless to every other process should the sandbox fail.
    received: list[int] = []
    previous = signal.signal(signal.SIGURG, lambda sig, frame: received.append(sig))
    try:
        found = verdicts(kernel.hostile(source, FAST).episodes[0])
        time.sleep(0.05)
    finally:
        signal.signal(signal.SIGURG, previous)
    # kill(-1) reports success even when every single delivery is refused; the host counts.
    assert_all_denied(
        found, [name for name in found if name not in ("own status", "signal everyone")]
    )
    assert received == []
    assert found["own status"] == "ALLOWED True"


# Raw system calls for the attacks the C library has no wrapper for; EPERM and EACCES
# come back as PermissionError, anything else (EFAULT, ESRCH) as a plain OSError.
PRY = """\
import ctypes

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def call(name, *args):
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(NR[name]), *(ctypes.c_long(a) for a in args))
    if result < 0:
        raise OSError(ctypes.get_errno(), name)
    return result


class IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def read_memory(pid, address, size):
    local = ctypes.create_string_buffer(size)
    mine, theirs = IOVec(ctypes.addressof(local), size), IOVec(address, size)
    call("process_vm_readv", pid, ctypes.addressof(mine), 1, ctypes.addressof(theirs), 1, 0)
    return local.raw
"""
PTRACE_SEIZE = 0x4206  # attaches without stopping the tracee, should it ever succeed


@needs("filesystem", "signals", "syscalls")
def test_a_policy_cannot_trace_or_read_the_memory_of_the_host_or_the_template(
    kernel: Kernel,
) -> None:
    secret = ctypes.create_string_buffer(f"SECRET-{uuid.uuid4().hex}".encode())
    numbers = {**linux.denied_calls(), "pidfd_open": 434, "pidfd_send_signal": 424}
    source = attacker(
        f"""\
        attempt("trace the host", lambda: call("ptrace", {PTRACE_SEIZE}, HOST, 0, 0))
        attempt("trace the template", lambda: call("ptrace", {PTRACE_SEIZE}, os.getppid(), 0, 0))
        attempt("read the host's memory", lambda: read_memory(HOST, ADDRESS, SIZE))
        attempt("read the template's memory", lambda: read_memory(os.getppid(), ADDRESS, SIZE))
        attempt("open the host's memory", lambda: open(f"/proc/{{HOST}}/mem", "rb"))
        attempt("take the template's descriptor", lambda: call(
            "pidfd_getfd", call("pidfd_open", os.getppid(), 0), 0, 0))
        attempt("signal the host through a pidfd", lambda: call(
            "pidfd_send_signal", call("pidfd_open", HOST, 0), signal.SIGURG, 0, 0))
        """,
        top=(
            f"import signal\nNR = {numbers!r}\n{PRY}\n"
            f"HOST, ADDRESS, SIZE = {os.getpid()}, {ctypes.addressof(secret)}, {len(secret)}\n"
        ),
    )
    received: list[int] = []
    previous = signal.signal(signal.SIGURG, lambda sig, frame: received.append(sig))
    try:
        feedback = kernel.hostile(source, FAST)
        time.sleep(0.05)
    finally:
        signal.signal(signal.SIGURG, previous)
    found = verdicts(feedback.episodes[0])
    assert len(found) == 7 and set(found.values()) == {"denied PermissionError"}, found
    assert received == []
    assert secret.value.decode() not in feedback.model_dump_json()


def test_lazily_imported_modules_and_numpy_work_inside_the_sandbox(kernel: Kernel) -> None:
    source = policy_with_act(
        """\
        import fractions, json.decoder, decimal, statistics
        weights = numpy.linalg.solve(numpy.eye(4), numpy.asarray(observation))
        half = fractions.Fraction(1, 2) + float(decimal.Decimal("0.5"))
        json.decoder.JSONDecoder().decode("[1]")
        return int(weights[2] + weights[3] > 0) if half == 1 else 0
        """,
        top="import numpy, json",
    )
    feedback = kernel.evaluate(source, FAST, 2)
    assert [s.status for s in feedback.episodes] == ["ok", "ok"], feedback.episodes
    assert all(s.steps > 20 for s in feedback.episodes)


@needs("syscalls")
def test_the_seccomp_filter_refuses_its_calls_and_lets_the_others_through() -> None:
    # Every call gets invalid arguments: one the filter let through would fail otherwise.
    clone, clone3, getppid = {"x86_64": (56, 435, 110), "aarch64": (220, 435, 173)}[
        os.uname().machine
    ]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child only makes system calls and reports their errno
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            bad = [ctypes.c_long(-1)] * 6

            def errno_of(nr: int, *args: object) -> int:
                ctypes.set_errno(0)
                libc.syscall(ctypes.c_long(nr), *args)
                return ctypes.get_errno()

            filt = linux.seccomp_filter()
            assert filt is not None
            linux.set_no_new_privs()
            linux.install_filter(filt)
            found = {name: errno_of(nr, *bad) for name, nr in linux.denied_calls().items()}
            found["clone3"] = errno_of(clone3, None, ctypes.c_long(0))
            # CLONE_NEWUSER with CLONE_FS is EINVAL to the kernel: no process is ever made.
            found["clone, new user namespace"] = errno_of(
                clone, ctypes.c_long(0x10000200), *bad[:4]
            )
            found["getppid"] = errno_of(getppid)
            found["read"] = errno_of(0 if clone == 56 else 63, *bad[:3])
            os.write(w, json.dumps(found).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as pipe:
        found = json.loads(pipe.read() or "{}")
    os.waitpid(pid, 0)
    refused = {name for name, err in found.items() if err == errno.EPERM}
    assert refused == {*linux.denied_calls(), "clone, new user namespace"}
    assert found["clone3"] == errno.ENOSYS
    assert (found["getppid"], found["read"]) == (0, errno.EBADF)


# -- detection and settings ----------------------------------------------------


def test_the_probe_names_every_layer_with_its_reason() -> None:
    assert list(PROBE.layers) == list(sandbox.LAYERS)
    assert all(layer.detail for layer in PROBE)
    text = PROBE.text()
    assert all(name in text for name in sandbox.LAYERS)


@pytest.mark.parametrize("name", ["network", "disk", "memory", "processes"])
def test_strict_isolation_refuses_a_missing_layer_and_the_default_reports_it(name: str) -> None:
    layers = dict(PROBE.layers)
    layers[name] = sandbox.Layer(name, False, "unshare: Operation not permitted")
    crippled = sandbox.Probe(layers, PROBE.landlock_abi)
    with pytest.raises(sandbox.SandboxError, match=f"{name}.*Operation not permitted"):
        sandbox.prepare(sandbox.Isolation(strict=True), crippled)
    lenient = sandbox.Sandbox(sandbox.Isolation(), crippled)
    assert [layer.name for layer in lenient.missing] == [name]
    assert name in sandbox.describe_missing(lenient.missing)
    assert "MISSING" in crippled.text() and "Operation not permitted" in crippled.text()
    assert sandbox.Sandbox(sandbox.Isolation(**{name: False}), crippled).missing == []


def test_isolation_settings_survive_the_trip_to_the_template() -> None:
    isolation = sandbox.Isolation(syscalls=False, strict=True, hidden=("/srv/records",))
    assert sandbox.Isolation.from_json(isolation.to_json()) == isolation
    assert sandbox.Isolation.none().requested() == []


def test_the_runtime_grant_leaves_out_the_checkout_and_anything_holding_a_hidden_path() -> None:
    prefix = os.path.realpath(sys.prefix)
    assert prefix in sandbox.runtime_paths()
    paths = sandbox.runtime_paths(hidden=[os.path.join(prefix, "records")])
    assert prefix not in paths
    checkout = os.path.realpath(Path(sandbox.__file__).parent.parent)
    assert checkout not in paths
    assert "/" not in paths and os.path.realpath("/tmp") not in paths


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
        kernel.runner.open(
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
        return kernel.runner.open(
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
    kernel.runner.settle()
    template = kernel.runner.template_pid
    assert template is not None
    deadline = time.monotonic() + 5.0
    while strays_of(template) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert strays_of(template) == [], "both episodes' grandchildren went with them"
