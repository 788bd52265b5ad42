"""The sandbox of policy processes, attacked by real policies through the real runner.

Each policy tries what it must not, catches what the sandbox answers and
prints a verdict per attempt (never what it read); the test reads the
verdicts from the captured output and checks the host side too: the files,
the listener, the feedback. A test whose layer this machine lacks is skipped
with the reason :func:`evopolicy_mcp.kernel.sandbox.probe` gives.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import socket
import sys
import time
import uuid
from pathlib import Path

import pytest

from evopolicy_mcp.evaluation.episodes import evaluate
from evopolicy_mcp.evaluation.feedback import EpisodeSummary
from evopolicy_mcp.evaluation.snapshot import capture_files
from evopolicy_mcp.kernel import linux, sandbox
from evopolicy_mcp.store.database import DB_NAME, Store
from tests.support.kernel import (
    Kernel,
    needs,
    policy_with_act,
    with_limits,
)

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


# Watches a directory with inotify (names of files made there show in its events).
WATCH = """
import ctypes
_LIBC = ctypes.CDLL(None, use_errno=True)

def watch(path):
    fd = _LIBC.inotify_init1(0)
    if fd < 0 or _LIBC.inotify_add_watch(fd, path.encode(), 0xFFF) < 0:
        raise PermissionError(ctypes.get_errno(), "inotify")
    return fd
"""


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
        attempt("watch its directory", lambda: watch(os.path.dirname(PATH)))
        """,
        top=f"PATH = {str(tmp_path / 'secret.txt')!r}\n{WATCH}",
    )
    feedback = kernel.evaluate(source, FAST, 1)
    found = verdicts(feedback.episodes[0])
    assert_all_denied(found, ["read", "list", "read through /proc/self/root"])
    assert found["read"] == "denied PermissionError"
    if PROBE.layers[
        "syscalls"
    ].available:  # Landlock does not check watches: the filter refuses inotify
        assert found["watch its directory"] == "denied PermissionError", found
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
    feedback = evaluate(
        program,
        FAST,
        kernel.jobs(FAST, 1),
        runner=kernel.runner,
        workers=1,
        executor=kernel.executor,
    )
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


@needs("syscalls")
def test_a_policy_cannot_change_the_limits_or_scheduling_of_another_process(
    kernel: Kernel,
) -> None:
    # Same uid: without the filter the kernel lets any policy lower the server's limits
    # (RLIMIT_NOFILE, RLIMIT_CPU...), and move or renice a process with no more
    # capabilities than its own (a concurrent episode's, here VICTIM; the server's
    # scheduling the capability check guards as well). Every attempt would change nothing.
    core = resource.getrlimit(resource.RLIMIT_CORE)
    nice = os.getpriority(os.PRIO_PROCESS, os.getpid())
    cpus = sorted(os.sched_getaffinity(0))
    gate_r, gate_w = os.pipe()
    victim = os.fork()
    if victim == 0:  # a process as capability-less as a policy, until the test lets it go
        try:
            os.close(gate_w)
            linux.drop_capabilities()
            os.read(gate_r, 1)
        finally:
            os._exit(0)
    os.close(gate_r)
    try:
        source = attacker(
            """\
            for who, pid in (("host", HOST), ("template", os.getppid()), ("victim", VICTIM)):
                attempt(f"read the {who}'s limits", lambda: resource.prlimit(
                    pid, resource.RLIMIT_CORE))
                attempt(f"set the {who}'s limits", lambda: resource.prlimit(
                    pid, resource.RLIMIT_CORE, CORE))
            for who, pid in (("host", HOST), ("victim", VICTIM)):
                attempt(f"renice the {who}", lambda: os.setpriority(os.PRIO_PROCESS, pid, NICE))
                attempt(f"pin the {who}", lambda: os.sched_setaffinity(pid, CPUS))
                attempt(f"reschedule the {who}", lambda: os.sched_setscheduler(
                    pid, os.SCHED_OTHER, os.sched_param(0)))
            attempt("own limits", lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
            attempt("own nice", lambda: os.nice(1))
            attempt("own CPUs", lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)))
            attempt("own limits by pid", lambda: resource.prlimit(
                os.getpid(), resource.RLIMIT_CORE))
            attempt("own CPUs by pid", lambda: os.sched_setaffinity(os.getpid(), CPUS[:1]))
            """,
            top=(
                "import resource\n"
                f"HOST, VICTIM, CORE, NICE, CPUS = {os.getpid()}, {victim}, {core}, {nice}, {cpus}\n"
            ),
        )
        found = verdicts(kernel.hostile(source, FAST).episodes[0])
    finally:
        os.close(gate_w)
        os.waitpid(victim, 0)
    others = [name for name in found if not name.startswith("own")]
    assert len(others) == 12, found
    assert {found[name] for name in others} == {"denied PermissionError"}, found
    own = [name for name in found if name.startswith("own")]
    assert len(own) == 5 and {found[name].split()[0] for name in own} == {"ALLOWED"}, found
    assert resource.getrlimit(resource.RLIMIT_CORE) == core


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
    checkout = os.path.realpath(Path(sandbox.__file__).parents[2])
    assert checkout not in paths
    assert "/" not in paths and os.path.realpath("/tmp") not in paths
