"""What policy processes leave behind and what they can see (real processes)."""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from evopolicy_mcp.evaluation.episodes import EvaluationAborted
from evopolicy_mcp.evaluation.snapshot import capture_files
from evopolicy_mcp.kernel import sandbox
from evopolicy_mcp.kernel.confine import ProcessLimits
from evopolicy_mcp.kernel.zygote import SPARES
from evopolicy_mcp.runner.template import Failure, Runner, policy_environment
from tests.support.kernel import (
    FAST,
    GOOD_CARTPOLE,
    IMPORTS,
    TASKS,
    Kernel,
    children_of,
    pids_with_cmdline,
    policy_with_act,
    process_state,
    spares_of,
    strays_of,
    with_limits,
)

# -- processes the policy leaves behind --------------------------------------

# Each prints "LEFT <pid>" for a process that outlives the policy's act() call. Sleepers
# exec the Python runtime with MARK on their command line, so a scan of /proc finds them;
# the close-on-exec pipe tells the parent that the exec happened.
EXEC_SLEEPER = """\
def leave_group():
    try:
        os.setsid()
    except PermissionError:  # sessions refused (seccomp): a process group of its own
        os.setpgid(0, 0)


def exec_sleeper(tag, session=False):
    r, w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            if session:
                leave_group()
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(1000)", tag])
        finally:
            os.write(w, b"!")
            os._exit(1)
    os.close(w)
    failed = os.read(r, 1)
    os.close(r)
    if failed:
        raise RuntimeError("the sleeper could not exec")
    return pid
"""

LEAVERS = {
    # A plain forked child: a copy of the policy process, still in its process group.
    "child": """\
        pid = os.fork()
        if pid == 0:
            time.sleep(1000)
            os._exit(0)
        print("LEFT", pid, flush=True)
        """,
    # A child in a session (or a process group) of its own, out of reach of a group kill.
    "session": """\
        print("LEFT", exec_sleeper(MARK + "-session", session=True), flush=True)
        """,
    # The classic daemon: fork, setsid, fork again, the middle process exits.
    "daemon": """\
        r, w = os.pipe()
        middle = os.fork()
        if middle == 0:
            try:
                leave_group()
                os.write(w, str(exec_sleeper(MARK + "-daemon")).encode())
            finally:
                os._exit(0)
        os.waitpid(middle, 0)
        os.close(w)
        print("LEFT", int(os.read(r, 32)), flush=True)
        os.close(r)
        """,
}


@pytest.mark.parametrize("kind", list(LEAVERS))
def test_processes_forked_by_a_policy_do_not_outlive_the_episode(kernel: Kernel, kind: str) -> None:
    marker = f"evopolicy-test-{uuid.uuid4().hex}"
    body = (
        "if not self.forked:\n"
        "    self.forked = True\n"
        + textwrap.indent(textwrap.dedent(LEAVERS[kind]), "    ")
        + "return 1 if observation[2] > 0 else 0\n"
    )
    source = policy_with_act(
        body, top=f"{IMPORTS}\nMARK = {marker!r}\n{EXEC_SLEEPER}", init="self.forked = False"
    )
    feedback = kernel.hostile(source, with_limits(FAST, act_seconds=5.0), 2)
    kernel.own_runner().settle()
    left = []
    for summary in feedback.episodes:
        assert summary.status == "ok", summary
        lines = [line for line in (summary.stderr or "").splitlines() if line.startswith("LEFT")]
        assert len(lines) == 1, summary.stderr
        left.append(int(lines[0].split()[1]))
    assert all(process_state(pid) is None for pid in left), [process_state(p) for p in left]
    assert pids_with_cmdline(marker) == []
    template = kernel.own_runner().template_pid
    assert template is not None and process_state(template) not in (None, "Z")
    assert strays_of(template) == [], "no child of an episode is left, not even a zombie"
    assert len(spares_of(template)) <= SPARES, "at most the idle spares"


HOST_SCRIPT = """
import sys
from pathlib import Path
from evopolicy_mcp.evaluation import seeds
from evopolicy_mcp.evaluation.episodes import evaluate, jobs_for
from evopolicy_mcp.evaluation.snapshot import capture_files
from evopolicy_mcp.tasks.model import get_task

task = get_task("cartpole")
task = task.model_copy(update={"limits": task.limits.model_copy(
    update={"act_seconds": 60.0, "episode_seconds": 60.0})})
program = capture_files({"policy.py": sys.stdin.read()}, Path(sys.argv[1]))
evaluate(program, task, jobs_for(task, "train", [0], seeds.secret_from_seed(0)), workers=1)
"""


def test_a_killed_template_takes_what_its_policies_forked_and_its_scratch_with_it() -> None:
    """A template killed outright (SIGKILL, the OOM killer) takes its episode leaders along
    by their parent-death signal; the host kills what they forked and removes the rest."""
    marker = f"evopolicy-test-{uuid.uuid4().hex}"
    policy = policy_with_act(
        "return 0", top=f"{IMPORTS}\nMARK = {marker!r}\n{EXEC_SLEEPER}", init=LEAVERS["daemon"]
    )
    runner = Runner()
    daemons: list[int] = []
    try:
        with tempfile.TemporaryDirectory() as store:
            program = capture_files({"policy.py": policy}, Path(store))
            limits = FAST.limits
            with runner.open(
                program.path,
                ProcessLimits(),
                act_seconds=limits.act_seconds,
                startup_seconds=limits.startup_seconds,
                episode_seconds=limits.episode_seconds,
            ) as proc:
                proc.start({"task_id": "t", "observation_space": {}, "action_space": {}})
                daemons = pids_with_cmdline(marker)
                assert daemons, proc.output()
                template = runner.template_pid
                assert template is not None
                with open(f"/proc/{template}/cmdline", "rb") as f:
                    args = f.read().decode().split("\0")
                scratch_root = Path(next(a for a in args if "evopolicy-scratch-" in a))
                assert scratch_root.name.startswith("evopolicy-scratch-"), scratch_root
                os.kill(template, signal.SIGKILL)
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and (
                    scratch_root.exists()
                    or any(process_state(p) not in (None, "Z") for p in daemons)
                ):
                    time.sleep(0.05)
                assert [p for p in daemons if process_state(p) not in (None, "Z")] == []
                assert not scratch_root.exists()
    finally:
        runner.close()
        for pid in daemons:  # never leave a sleeper behind, even when the test fails
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    # The killed processes are reaped by init, whenever it gets to it: then their groups go.
    deadline = time.monotonic() + 60
    while left := list(Path("/sys/fs/cgroup").glob(f"*/evopolicy-{os.getpid()}-{template}")):
        assert time.monotonic() < deadline, f"the runner's cgroups stayed: {left}"
        time.sleep(0.1)


def test_a_killed_host_takes_its_policy_processes_and_their_daemons_with_it(
    tmp_path: Path,
) -> None:
    marker = f"evopolicy-test-{uuid.uuid4().hex}"
    policy = policy_with_act(
        "time.sleep(1000)",
        top=f"{IMPORTS}\nMARK = {marker!r}\n{EXEC_SLEEPER}",
        init=LEAVERS["daemon"],
    )
    host = subprocess.Popen(
        [sys.executable, "-c", HOST_SCRIPT, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert host.stdin is not None and host.stderr is not None
    host.stdin.write(policy.encode())
    host.stdin.close()
    daemons: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while not daemons and time.monotonic() < deadline and host.poll() is None:
            time.sleep(0.05)
            daemons = pids_with_cmdline(marker)
        assert daemons, host.stderr.read().decode() if host.poll() is not None else "no daemon"
        templates = children_of(host.pid)
        policies = [pid for t in templates for pid in children_of(t) if pid not in daemons]
        assert len(templates) == 1 and policies, (templates, policies)
        host.send_signal(signal.SIGKILL)
        host.wait()
        watched = [*templates, *policies, *daemons]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(
            process_state(p) not in (None, "Z") for p in watched
        ):
            time.sleep(0.05)
        assert [p for p in watched if process_state(p) not in (None, "Z")] == []
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        for pid in daemons:  # never leave a sleeper behind, even when the test fails
            if process_state(pid) not in (None, "Z"):
                os.kill(pid, signal.SIGKILL)


# -- what a policy process can see -------------------------------------------


def test_a_policy_process_holds_nothing_of_the_host(kernel: Kernel) -> None:
    source = """\
    import os, sys

    def make_policy(context):
        print("ENV", sorted(os.environ.items()))
        print("FDS", sorted(int(fd) for fd in os.listdir("/proc/self/fd")))
        print("MODULES", sorted(m for m in sys.modules if m.split(".")[0] in WATCHED))
        print("CWD", os.getcwd(), os.listdir("."))
        return Policy()

    WATCHED = {"evopolicy_mcp", "gymnasium", "pydantic", "mcp", "sqlite3", "environments"}

    class Policy:
        def act(self, observation):
            return 0
    """
    program = kernel.program(source)
    summary = kernel.only(program, FAST)
    assert summary.status == "ok" and summary.stderr is not None, summary
    seen = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in summary.stderr.splitlines()}
    assert seen["ENV"] == str(sorted(policy_environment().items()))
    # 0-2 standard streams, 3-4 frame pipes, plus the one listdir opened.
    assert ast.literal_eval(seen["FDS"]) == [0, 1, 2, 3, 4, 5]
    modules = ast.literal_eval(seen["MODULES"])
    assert not [m for m in modules if not m.startswith("evopolicy_mcp")], modules
    # Only the kernel layer and the ABI: nothing of the host side of the boundary.
    host_side = [
        m
        for m in modules
        if m not in ("evopolicy_mcp", "evopolicy_mcp.policy")
        and not m.startswith("evopolicy_mcp.kernel")
    ]
    assert not host_side and "evopolicy_mcp.kernel.child" in modules, modules
    cwd, listing = seen["CWD"].split(" ", 1)
    assert listing == "[]"
    assert not cwd.startswith(str(program.path)) and not cwd.startswith(str(kernel.store))


# Reads the policy process's whole memory for markers of the form evopolicy-test-<32 hex>.
SPY = r"""
import re

PATTERN = re.compile(rb"evopolicy-test-[0-9a-f]{32}")
CHUNK = 16 << 20

def make_policy(context):
    found = set()
    with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if "r" not in fields[1] or fields[-1] in ("[vvar]", "[vsyscall]"):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            for offset in range(start, end, CHUNK):
                try:
                    mem.seek(offset)
                    chunk = mem.read(min(CHUNK + 64, end - offset))
                except (OSError, ValueError, OverflowError):
                    break
                found.update(m.decode() for m in PATTERN.findall(chunk))
    print("FOUND", " ".join(sorted(found)))
    return Policy()

class Policy:
    def act(self, observation):
        return 0
"""


def test_a_policy_cannot_read_other_programs_from_the_template(kernel: Kernel) -> None:
    marker, own = (f"evopolicy-test-{uuid.uuid4().hex}" for _ in range(2))
    other = f"{GOOD_CARTPOLE}\nPRIVATE = {marker!r}\n"
    assert kernel.only(other, FAST).status == "ok"
    summary = kernel.only(f"{SPY}\nOWN = {own!r}\n", FAST)
    assert summary.status == "ok", summary
    assert summary.stderr is not None and summary.stderr.startswith("FOUND")
    assert own in summary.stderr, "the scan finds the policy's own text, so it would find more"
    assert marker not in summary.stderr, "another program's text is in this policy's memory"


def test_a_policy_holds_neither_the_hidden_paths_nor_where_programs_are_kept(
    tmp_path: Path,
) -> None:
    """What the template was told (the paths policies must not read) and what spawns
    named (where programs are kept, under their digests) is in no policy's memory:
    not its command line, not its heap inherited from the template, not its own
    spawn message."""
    hidden, kept, own = (f"evopolicy-test-{uuid.uuid4().hex}" for _ in range(3))
    store = tmp_path / kept / "programs"
    store.mkdir(parents=True)
    runner = Runner(isolation=sandbox.Isolation(hidden=(str(tmp_path / hidden),)))
    kernel = Kernel(store, runner)
    try:
        other = kernel.program(GOOD_CARTPOLE)
        for _ in range(3):  # earlier spawns, and spares forked after them
            assert kernel.only(other, FAST).status == "ok"
        summary = kernel.only(f"{SPY}\nOWN = {own!r}\n", FAST)
    finally:
        kernel.close()
    assert summary.status == "ok", summary
    found = set((summary.stderr or "").split()[1:])
    assert own in found, "the scan finds the policy's own text, so it would find more"
    assert hidden not in found, "a path policies must not read is in a policy's memory"
    assert kept not in found, "where programs are kept is in a policy's memory"


def test_the_context_carries_the_public_spec_and_the_jobs_policy_seed(kernel: Kernel) -> None:
    source = """\
    def make_policy(context):
        print("SEED", context.policy_seed)
        print("TASK", context.task_id, context.action_space["type"], context.action_space["n"])
        print("META", context.metadata["env_id"])
        return Policy()

    class Policy:
        def act(self, observation):
            return 0
    """
    feedback = kernel.evaluate(source, FAST, 3)
    jobs = kernel.jobs(FAST, 3)
    for summary, job in zip(feedback.episodes, jobs, strict=True):
        assert f"SEED {job.policy_seed}\n" in (summary.stderr or "")
        assert "TASK cartpole discrete 2" in (summary.stderr or "")
        assert "META CartPole-v1" in (summary.stderr or "")
    assert len({job.policy_seed for job in jobs}) == 3


def test_a_discrete_observation_arrives_as_a_plain_int(kernel: Kernel) -> None:
    source = policy_with_act(
        "print(type(observation).__name__, flush=True)\nreturn 0",
    )
    summary = kernel.only(source, with_limits(TASKS["frozenlake"], act_seconds=0.5))
    assert summary.status == "ok", summary
    assert set((summary.stderr or "").split()) == {"int"}


def test_a_policy_cannot_turn_its_episode_into_a_host_fault_by_killing_the_template(
    tmp_path: Path,
) -> None:
    # A host fault is refunded, not charged: a policy must not be able to provoke one.
    own = Kernel(tmp_path)  # should the kill land, only this runner's template dies
    try:
        source = policy_with_act(
            "os.kill(os.getppid(), signal.SIGKILL)\nos.kill(os.getppid(), signal.SIGTERM)\nreturn 0",
            top=IMPORTS,
        )
        try:
            feedback = own.hostile(source, FAST, 2)
        except EvaluationAborted as exc:
            pytest.fail(f"the policy aborted its own evaluation: {exc}")
        for summary in feedback.episodes:
            assert summary.status == "ok" or summary.failure == Failure.EXCEPTION, summary
    finally:
        own.close()


# -- where the processes run ---------------------------------------------------

# Prints the CPUs its process may run on ("CPUS [0, 1]"), then always moves left.
SAY_CPUS = """\
import os

def make_policy(context):
    print("CPUS", sorted(os.sched_getaffinity(0)), flush=True)
    return Zero()

class Zero:
    def act(self, observation):
        return 0
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_spares_are_forked_on_the_first_cpu_whoever_starts_the_template(
    tmp_path: Path,
) -> None:
    """A worker thread pinned to one CPU may be the first to need a policy process: the
    template it starts must not inherit that pin. Spares are forked on the first CPU;
    policy processes run on the CPU their worker was placed with, and the template
    waits there for the next request."""
    cpus = sorted(os.sched_getaffinity(0))
    kernel = Kernel(tmp_path, Runner())
    seen: dict[str, object] = {}

    def pinned_worker() -> None:
        os.sched_setaffinity(0, {cpus[-1]})  # this thread only, as a worker pins itself
        try:
            seen["feedback"] = kernel.evaluate(SAY_CPUS, episodes=1)
            template = kernel.runner.template_pid or 0
            kernel.runner.settle()
            time.sleep(0.1)  # idle: the next spare is forked and the template waits
            seen["template"] = os.sched_getaffinity(template)
            seen["spares"] = [os.sched_getaffinity(pid) for pid in spares_of(template)]
        except BaseException as exc:
            seen["error"] = exc

    try:
        thread = threading.Thread(target=pinned_worker)
        thread.start()
        thread.join(120)
        assert "error" not in seen, seen.get("error")
        spares = seen["spares"]
        assert spares and all(cpu == {cpus[0]} for cpu in spares), spares  # type: ignore[attr-defined]
        assert seen["template"] == {cpus[-1]}, "it waits on the last episode's CPU"
        summary = seen["feedback"].episodes[0]  # type: ignore[attr-defined]
        assert summary.status == "ok", summary
        # The evaluation's executor was made in the pinned thread: its one CPU is the policy's.
        assert f"CPUS [{cpus[-1]}]" in (summary.stderr or "")
    finally:
        kernel.close()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
@pytest.mark.parametrize("workers", [1, 3])
def test_policy_processes_run_off_the_cpu_of_the_host(kernel: Kernel, workers: int) -> None:
    """The host steps every episode of an evaluation on the first CPU; policy
    processes, one episode's or several at once, spin elsewhere. A worker process
    steps its episodes on its one CPU, and their policy processes take turns with it
    there."""
    host = sorted(os.sched_getaffinity(0))[0]
    feedback = kernel.evaluate(SAY_CPUS, "cartpole", 3, workers=workers)
    for summary in feedback.episodes:
        said = re.search(r"CPUS \[([0-9, ]+)\]", summary.stderr or "")
        assert said, summary.stderr
        cpus = [int(cpu) for cpu in said.group(1).split(",")]
        if kernel.executor is None:
            assert host not in cpus, said.group(0)
        else:
            assert len(cpus) == 1, said.group(0)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_a_policy_process_asked_for_no_cpu_may_use_them_all(kernel: Kernel) -> None:
    """Spares start on the template's one CPU: one that is given no CPU of its own (an
    executor that does not place its episodes) must not stay there."""
    program = kernel.program(SAY_CPUS)
    with kernel.own_runner().open(
        program.path, ProcessLimits(), act_seconds=5.0, startup_seconds=20.0, episode_seconds=30.0
    ) as proc:
        proc.start({"task_id": "cpus", "observation_space": {}, "action_space": {}})
        assert proc.act(0) == 0
        output = proc.output()
    assert f"CPUS {sorted(os.sched_getaffinity(0))}" in output, output
