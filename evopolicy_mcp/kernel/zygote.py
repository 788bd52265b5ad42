"""The template process: a warm, clean interpreter that forks one policy process per episode.

Started once per :class:`~evopolicy_mcp.runner.template.Runner` with a minimal
environment and nothing of the host imported (no tasks, no records, no
simulators). Forking it costs a millisecond or two where a new interpreter
costs tens.

It is also the reaper. It is a child subreaper, so anything a policy leaves
behind (a daemonised grandchild, a child that outlived its parent) is
reparented here and killed when its episode ends; it dies with the host
(parent-death signal) and takes every policy process with it. Invariant: when
the host hears that an episode's process exited, no process of that episode
remains.

Each spare gets its scratch directory when it is forked
(:mod:`evopolicy_mcp.kernel.scratch`: a tmpfs of its quota, unmounted by the
template's tidier process once its episode is reaped and swept). Likewise
its cgroups (the ``memory`` and ``processes`` layers,
:mod:`evopolicy_mcp.kernel.cgroups`): given to the spare (made, or reused), the
spare moved in right after the fork, their limits rewritten at hand-over
only should the episode ask for others; after the episode is reaped and
swept the template reads whether its memory limit OOM-killed anything (the
exit report says so). Once its scratch is gone, the template hands them,
emptied, to later spares if they hold next to no memory, and removes them
otherwise. It keeps ``SPARES`` spares forked ahead.

The template never reads a program's files, so a policy process's memory
holds no program but its own (it could read its memory; other programs, other
runs' included, must not be there). Nor does it learn where programs are or
what they are called: a spawn carries the program as a directory descriptor,
never a path or a digest. The paths policies must not read (the records, the
tasks) reach only a short-lived child of the template (:func:`runtime_grants`),
never its command line or its memory, which every spare inherits; a spare
drops the template's bookkeeping of other episodes before it waits.

A template of a hidden split (``Isolation.private_runtime``) first copies the
policy runtime to a tmpfs of its own mount namespace, binds it over the
originals and starts its interpreter again from it (:func:`private_start`):
every page its policy processes read or map is then its own
(:mod:`evopolicy_mcp.kernel.runtime`). Other templates show the folders that
copy leaves out (test suites) empty, so that every split sees the same runtime.

Control protocol (host <-> template, a SOCK_SEQPACKET pair; both ends are
trusted code, policy processes close it before any program code runs): JSON
messages; ``spawn`` carries four descriptors (observations read end,
actions write end, output write end, the program's directory) as SCM_RIGHTS,
and a fifth, the episode's mailbox (:mod:`evopolicy_mcp.kernel.mailbox`),
when the host spins.
"""

from __future__ import annotations

import gc
import json
import os
import selectors
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from evopolicy_mcp.kernel import cgroups, confine, mailbox, runtime, sandbox
from evopolicy_mcp.kernel.child import run_policy, warm_up
from evopolicy_mcp.kernel.limits import ProcessLimits
from evopolicy_mcp.kernel.scratch import Scratch, Tidier, copy_program, warm_copy

__all__ = ["main"]

PRELOAD = (
    "numpy",
    "math",
    "random",
    "json",
    "collections",
    "itertools",
    "functools",
    "dataclasses",
    "typing",
    "heapq",
    "bisect",
    "statistics",
    "re",
    "traceback",
    "importlib.util",
)
MAX_CONTROL_MESSAGE = 1 << 16
SPAWN_FDS = 5  # observations, actions, output, the program's directory, maybe a mailbox
SPARES = 2  # policy processes kept forked ahead (one was often not ready for short episodes)
SPARE_IDLE_SECONDS = 0.002  # idle this long, the template forks a spare it could not fork before
RETIRE_IDLE_SECONDS = 0.05  # remove ended episodes' cgroups once idle this long
CONFINED_REPORT = b"confined"
TEMPLATE_SIGNALS = {signal.SIGTERM, signal.SIGCHLD, signal.SIGINT}


class Template:
    def __init__(
        self,
        control: socket.socket,
        scratch_root: str,
        box: sandbox.Sandbox | None = None,
        groups: cgroups.Groups | None = None,
        cpus: set[int] | None = None,
    ) -> None:
        self.control = control
        self.cpus = cpus or os.sched_getaffinity(0)  # the CPUs policy processes may use
        # Where the template works (forks spares) and where it waits: the first CPU, and the
        # CPU of the last episode it started (see serve).
        self.home = min(self.cpus)
        self.wait_cpu: int | None = None
        self.on_cpu = self.home
        self.sandbox = box
        self.leaders: dict[int, int] = {}  # pid -> episode id
        self.pids: dict[int, int] = {}  # episode id -> pid
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.children_file = f"/proc/self/task/{os.getpid()}/children"
        self.spares: list[tuple[int, socket.socket]] = []  # oldest (readiest) first
        self.spare_failed = False  # the last fork of a spare failed: wait for news to retry
        self.scratch: dict[int, str] = {}  # pid of a spare or episode leader -> its scratch dir
        self.spares_made = 0
        # Scratch directories: tmpfs mounts of a quota with the disk layer, else plain.
        disk = box is not None and box.disk
        self.space = Scratch(scratch_root, ProcessLimits() if disk else None)
        # The episode cgroups (memory, processes) of spares and episodes, by pid.
        self.pool = cgroups.GroupPool(groups) if groups is not None and groups.controllers else None
        self.group_of: dict[int, cgroups.EpisodeGroup] = {}
        # Unmounts what reported episodes held, in a process of its own.
        self.tidier: Tidier[cgroups.EpisodeGroup] = Tidier(self.space.mounted)
        self.closing = False
        # Sockets of handed-over spares not yet confined, and the episodes that are.
        self.selector = selectors.DefaultSelector()
        self.reports: dict[int, socket.socket] = {}
        self.confined: set[int] = set()

    # -- host requests -------------------------------------------------------

    def spawn(self, msg: dict[str, Any], fds: list[int]) -> None:
        episode = int(msg["id"])
        spare = None
        try:
            if not self.spares:
                self.make_spare()
            spare = self.spares.pop(0)
            pid, sock = spare
            scratch = self.scratch[pid]
            limits = ProcessLimits(**msg["limits"])
            self.space.fit(scratch, limits)
            group = self.group_of.get(pid)
            if group is not None and self.pool is not None:
                self.pool.fit(group, limits)
            # Onto the episode's CPU before it wakes: it starts there, while this
            # process forks the next spare here. An episode without one may use any.
            cpu = msg.get("cpu")
            confine.pin(self.cpus if cpu is None else {cpu}, pid)
            socket.send_fds(sock, [json.dumps({**msg, "scratch": scratch}).encode()], fds)
            self.wait_cpu = cpu
            self.move(self.home)  # at once: the woken spare needs this CPU
        except OSError as exc:
            if spare is not None:  # it will be reaped as a stray; its scratch goes now
                spare[1].close()
                try:
                    os.kill(spare[0], signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.drop(spare[0])
            self.send({"op": "error", "id": episode, "message": f"cannot start: {exc}"})
            return
        finally:
            for fd in fds:
                os.close(fd)
        sock.setblocking(False)
        self.reports[episode] = sock  # until it says it is confined (or closes it)
        self.selector.register(sock, selectors.EVENT_READ, episode)
        self.leaders[pid] = episode
        self.pids[episode] = pid

    def make_spare(self) -> None:
        """Fork the next policy process ahead of its episode.

        The spare waits for its episode's parameters and descriptors, so the
        fork (the largest part of starting a process) and making its scratch
        directory and cgroups are off the critical path.
        """
        self.spares_made += 1
        self.collect()
        scratch = self.space.make(str(self.spares_made))
        group = None
        try:
            if self.pool is not None:
                group = self.pool.take(str(self.spares_made))
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except OSError:
            self.space.remove(scratch)
            if group is not None:
                self.retire(group)
            raise
        template_pid = os.getpid()
        self.move(self.home)
        # The template's handlers (SIGTERM shuts it down) must never run in a spare:
        # blocked across the fork, reset in the child before they are let through.
        signal.pthread_sigmask(signal.SIG_BLOCK, TEMPLATE_SIGNALS)
        try:
            pid = os.fork()
        except OSError:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, TEMPLATE_SIGNALS)
            ours.close()
            theirs.close()
            self.space.remove(scratch)
            if group is not None:
                self.retire(group)
            raise
        if pid == 0:
            for sig in TEMPLATE_SIGNALS:
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, TEMPLATE_SIGNALS)
            try:
                ours.close()
                if group is not None:
                    # The spare moves itself, before it can have a program: a move waits
                    # for an RCU grace period (0.4 ms to 10 ms here), which would hold up
                    # the template and the next spawn.
                    group.join(os.getpid())
                self.become_policy(theirs, template_pid)
            except BaseException as exc:
                try:  # the operator's only clue: policy processes write nothing else here
                    os.write(
                        2, f"evopolicy-mcp: a policy process failed to start: {exc!r}\n".encode()
                    )
                except OSError:
                    pass
            os._exit(confine.EXIT_SPARE_FAILED)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, TEMPLATE_SIGNALS)
        theirs.close()
        self.scratch[pid] = scratch
        if group is not None:
            self.group_of[pid] = group
        self.spares.append((pid, ours))

    def move(self, cpu: int) -> None:
        if cpu != self.on_cpu:
            confine.pin({cpu})
            self.on_cpu = cpu

    def replace_spare(self) -> None:
        """Fork spares until there are SPARES now: after a spawn, the host waits for the
        process it just got to start (on another CPU) and leaves the template's CPU free."""
        while len(self.spares) < SPARES and not self.spare_failed:
            try:
                self.make_spare()
            except OSError:  # out of processes or memory for now: a spawn tries again
                self.spare_failed = True

    def drop(self, pid: int) -> None:
        """Free what a spare or an ended episode had: its scratch now, its cgroups when idle."""
        scratch = self.scratch.pop(pid, None)
        if scratch is not None:
            self.space.remove(scratch)
        group = self.group_of.pop(pid, None)
        if group is not None:
            self.retire(group)

    def retire(self, group: cgroups.EpisodeGroup) -> None:
        if self.pool is not None:
            self.pool.retire(group)

    def become_policy(self, sock: socket.socket, template_pid: int) -> None:
        """In a spare: wait for an episode, then confine and run its program."""
        confine.prctl(confine.PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != template_pid:
            return
        signal.set_wakeup_fd(-1)
        self.control.close()
        # The template's bookkeeping of other episodes is none of this one's business.
        self.leaders, self.pids, self.scratch, self.group_of = {}, {}, {}, {}
        self.spares, self.reports = [], {}
        if self.sandbox is not None:
            self.sandbox.begin()  # the episode-independent part of the sandbox, while it waits
        data, fds, _flags, _addr = socket.recv_fds(sock, MAX_CONTROL_MESSAGE, SPAWN_FDS)
        if not data or len(fds) not in (SPAWN_FDS - 1, SPAWN_FDS):
            return
        msg = json.loads(data)
        report = sock.detach()  # kept until the process is confined, then closed
        box = None
        if len(fds) == SPAWN_FDS:  # the episode's mailbox: mapped now, its descriptor closed
            box = mailbox.Mailbox(fds[4], host=False)
            os.close(fds.pop())
        # The program runs from a copy in its scratch directory: its own path then says
        # nothing about where the host keeps its records.
        program = os.path.join(msg["scratch"], "program")  # read-only to the policy
        work = os.path.join(msg["scratch"], "work")  # its working directory, read-write
        source = fds.pop()
        try:
            copy_program(source, program)
        finally:
            os.close(source)
        os.mkdir(work, 0o700)
        confine.enter_episode(
            *fds,
            scratch_dir=work,
            limits=ProcessLimits(**msg["limits"]),
            program_dir=program,
            sandbox=self.sandbox,
            report_fd=report,
        )
        try:  # the template's proof, which no program can unsay, that no fault of its came after
            os.write(confine.FD_REPORT, CONFINED_REPORT)
        finally:
            os.close(confine.FD_REPORT)
        run_policy(program, int(msg.get("spin", 0)), box, bool(msg.get("shared", False)))

    def kill(self, episode: int) -> None:
        pid = self.pids.get(episode)
        if pid is None or pid not in self.leaders:
            return  # already reaped: its exit report is on the way
        for send_kill in (os.killpg, os.kill):
            try:
                send_kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    # -- reaping -------------------------------------------------------------

    def children(self) -> list[int]:
        try:
            with open(self.children_file) as f:
                return [int(p) for p in f.read().split()]
        except OSError:
            return []

    def sweep(self) -> None:
        """Kill every child that is not a live episode leader: leftovers of ended episodes."""

        def strays() -> list[int]:
            ours = {pid for pid, _sock in self.spares} | {self.tidier.pid}  # None if gone
            return [p for p in self.children() if p not in self.leaders and p not in ours]

        kill_until_gone(strays)

    def reap(self) -> None:
        """Report every ended episode once nothing of it is left; free its scratch later.

        An exited leader is seen before it is reaped (``WNOWAIT``): while it is a
        zombie its pid, and so its process-group id, cannot be taken by a new
        process, so killing the group hits only the episode. With cgroups, the
        rest of the episode is what is left in its group, and only that is
        killed: strays of episodes still running are theirs, not this one's.
        The report comes before the scratch is freed, which the tidier does.
        """
        ended: list[tuple[int, int, int]] = []
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                break
            if info is None or info.si_pid == 0:
                break
            pid = info.si_pid
            if pid in self.leaders:
                try:
                    os.killpg(pid, signal.SIGKILL)  # the zombie leader holds the pgid
                except ProcessLookupError:
                    pass
            try:
                _pid, status = os.waitpid(pid, 0)
            except ChildProcessError:
                continue
            self.tidier.reaped(pid)
            for spare in self.spares:
                if spare[0] == pid:
                    spare[1].close()
                    self.spares.remove(spare)
                    self.spare_failed = True  # it died waiting: wait for news before the next
                    self.drop(pid)
                    break
            episode = self.leaders.pop(pid, None)
            if episode is not None:
                ended.append((episode, pid, status))
        for episode, pid, status in ended:
            self.take_report(episode, final=True)  # it came, if it did, before the end
            confined = episode in self.confined
            self.confined.discard(episode)
            group = self.group_of.pop(pid, None)
            self.end_group(group)  # nothing of the episode is left to use its scratch
            self.pids.pop(episode, None)
            oom = group is not None and group.oom_killed()
            self.send(
                {"op": "exited", "id": episode, "status": status, "oom": oom, "confined": confined}
            )
            self.tidier.put(self.space.release(self.scratch.pop(pid, None)), group)
        self.tidier.drain()  # its answers must not fill the pipe they come on

    def end_group(self, group: cgroups.EpisodeGroup | None) -> None:
        """Kill and reap what is left of an ended episode.

        With a process cgroup that is exactly its group's members; without one,
        every child of the template that is not a live leader or a spare (an
        episode's orphans are reparented here, but so are those of episodes
        still running: only cgroups tell them apart)."""
        if group is None or group.processes() is None:
            self.sweep()
            return
        kill_until_gone(lambda: group.processes() or [])

    def take_report(self, episode: int, final: bool = False) -> None:
        """Read whether an episode's process said it is confined; its socket goes then,
        or, with nothing to read yet, once ``final`` (the process has ended)."""
        sock = self.reports.pop(episode, None)
        if sock is None:
            return
        try:
            if sock.recv(16) == CONFINED_REPORT:
                self.confined.add(episode)
        except (BlockingIOError, InterruptedError):
            if not final:
                self.reports[episode] = sock  # nothing yet: keep listening
                return
        except OSError:
            pass
        self.selector.unregister(sock)
        sock.close()

    def collect(self) -> None:
        """Give the pool the groups of episodes whose scratch the tidier removed."""
        for group in self.tidier.finished():
            if self.pool is not None:
                self.pool.give_back(group)

    # -- loop ----------------------------------------------------------------

    def send(self, msg: dict[str, Any]) -> None:
        try:
            self.control.send(json.dumps(msg).encode())
        except OSError:
            self.shutdown()

    def shutdown(self) -> None:
        if self.closing:
            return  # a signal in the middle of a shutdown: that one goes on
        self.closing = True
        signal.pthread_sigmask(signal.SIG_BLOCK, TEMPLATE_SIGNALS)
        for pid in list(self.leaders):
            for send_kill in (os.killpg, os.kill):
                try:
                    send_kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        self.leaders.clear()
        for _pid, sock in self.spares:
            sock.close()  # a spare sees EOF and exits; sweep kills it anyway
        self.spares.clear()
        self.sweep()
        for pid in list(self.scratch):
            self.drop(pid)
        self.tidier.close()
        self.collect()
        if self.pool is not None:
            self.pool.close()
        shutil.rmtree(self.space.root, ignore_errors=True)
        os._exit(0)

    def serve(self) -> None:
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: self.shutdown())
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sel = self.selector
        sel.register(self.control, selectors.EVENT_READ, "control")
        sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        while True:
            # The next spare is forked right after each spawn. When the template has been
            # idle a moment: the first spares, or one that could not be forked then;
            # retired groups go with the next spare or after a long idle, as do the groups
            # the tidier emptied.
            if len(self.spares) < SPARES and not self.spare_failed:
                timeout: float | None = SPARE_IDLE_SECONDS
            elif (self.pool is not None and self.pool.retired) or self.tidier.busy():
                timeout = RETIRE_IDLE_SECONDS
            else:
                timeout = None
            # It waits on the CPU of the episode it started last. When that episode ends,
            # the CPU is free, and the kill, the reap and the next spawn are served at
            # once; on the first CPU they waited behind the host's episode thread, which
            # keeps running there until it sleeps (1-1.5 ms, about a scheduler slice).
            # Forking is done on the first CPU (Template.home), where the host sleeps
            # while a policy process starts (one episode at a time), or steps other
            # episodes meanwhile (several at once): forking where policy processes
            # spin, the next ones started later.
            if self.wait_cpu is not None:
                self.move(self.wait_cpu)
            events = sel.select(timeout)
            spare_failed, self.spare_failed = self.spare_failed, False
            if not events:
                if len(self.spares) < SPARES and not spare_failed:
                    self.replace_spare()
                else:
                    self.collect()
                    if self.pool is not None:
                        self.pool.remove_retired()
            # Requests before reaping: a spawn must not wait behind another episode's end.
            for key, _ in sorted(events, key=lambda event: event[0].data != "control"):
                if isinstance(key.data, int):  # an episode's process, about its confinement
                    self.take_report(key.data)
                    continue
                if key.data == "wake":
                    try:
                        while os.read(self.wake_r, 512):
                            pass
                    except BlockingIOError:
                        pass
                    continue
                try:
                    data, fds, _flags, _addr = socket.recv_fds(
                        self.control, MAX_CONTROL_MESSAGE, SPAWN_FDS
                    )
                except InterruptedError:
                    continue
                if not data:
                    self.shutdown()  # the host closed its end
                msg = json.loads(data)
                if msg["op"] == "spawn":
                    self.spawn(msg, fds)
                    self.replace_spare()
                elif msg["op"] == "kill":
                    self.kill(int(msg["id"]))
                elif msg["op"] == "exit":
                    self.shutdown()
            self.reap()  # a SIGCHLD can race the selector; reaping is cheap and idempotent


def kill_until_gone(find: Callable[[], list[int]]) -> None:
    """SIGKILL the processes ``find`` names, and reap those that are children of this
    process (others are reaped by their parents), until it names none."""
    for _ in range(1000):
        pids = find()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in pids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass  # not a child of this process, or gone


def main() -> None:
    control_fd, host_pid = int(sys.argv[1]), int(sys.argv[2])
    confine.prctl(confine.PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != host_pid:
        os._exit(0)  # the host died before the parent-death signal was armed
    isolation_json = sys.argv[3] if len(sys.argv) > 3 else None
    # The host makes the scratch root (and removes it should this process be killed).
    scratch_root = (
        sys.argv[5] if len(sys.argv) > 5 else tempfile.mkdtemp(prefix="evopolicy-scratch-")
    )
    private: int | None = None  # the private runtime's device, once started from it
    policy_runtime: runtime.Runtime | None = None
    if len(sys.argv) > 7:  # started again, from the private copy (private_start)
        policy_runtime, private = read_runtime(int(sys.argv[6])), int(sys.argv[7])
    elif len(sys.argv) > 6:
        policy_runtime = runtime_grants(int(sys.argv[6]))
        isolation = sandbox.Isolation.from_json(isolation_json) if isolation_json else None
        if isolation is not None and isolation.private_runtime:
            private_start(policy_runtime, scratch_root, isolation.strict)
    # A session of its own, without a controlling terminal: no policy process can reach
    # the operator's terminal, and none needs a session (and scheduler autogroup) of its own.
    os.setsid()
    # Before anything is forked (the probe included): every process below counts.
    max_processes = int(sys.argv[4]) if len(sys.argv) > 4 else cgroups.DEFAULT_MAX_PROCESSES
    groups = cgroups.Groups.enter(host_pid, max_processes)
    confine.prctl(confine.PR_SET_CHILD_SUBREAPER, 1)
    # On the first CPU, where the host's episode thread runs. Most of the template's
    # work comes while that thread sleeps waiting for a policy process to start;
    # anywhere else it would take turns with a policy process, which then misses
    # its hand-overs. Spares start here too; policy processes move to their own CPU.
    # Between episodes the template waits on the last one's CPU (Template.serve).
    cpus = os.sched_getaffinity(0)
    confine.pin({min(cpus)})
    os.umask(0o077)
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    warm_up()
    warm_copy()
    if private is not None:
        check_private(private, isolation_json)
    grants = policy_runtime.grants if policy_runtime is not None else None
    box = prepare_sandbox(isolation_json, groups, grants)
    if policy_runtime is not None and private is None and box.disk:
        mask_runtime(policy_runtime, scratch_root)
    groups.controllers = box.cgroups
    gc.collect()
    gc.freeze()  # keep the preloaded heap shared with every fork (no refcount-driven copies)
    control = socket.socket(fileno=control_fd)
    Template(control, scratch_root, box, groups, cpus).serve()


def runtime_grants(hidden_fd: int) -> runtime.Runtime:
    """The runtime files and directories policies may read, worked out in a child of
    this process from the paths they must not read (a JSON list on ``hidden_fd``):
    those paths never enter this process's memory, which every policy process inherits."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            with os.fdopen(hidden_fd, "rb") as f:
                hidden = json.loads(f.read() or b"[]")
            found = runtime.policy_runtime(sandbox.runtime_paths(hidden))
            os.write(w, found.to_json().encode())
        finally:
            os._exit(0)
    os.close(hidden_fd)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        answer = f.read()
    os.waitpid(pid, 0)
    if not answer:
        sys.stderr.write("evopolicy-mcp: cannot work out the runtime policies may read\n")
        os._exit(78)
    return runtime.Runtime.from_json(answer)


def read_runtime(fd: int) -> runtime.Runtime:
    with os.fdopen(fd, "rb") as f:
        return runtime.Runtime.from_json(f.read())


def mask_runtime(found: runtime.Runtime, scratch_root: str) -> None:
    """Show the folders the private copy leaves out as empty ones here too, so that
    training and hidden splits see the same runtime."""
    try:
        runtime.mask(found.masked, scratch_root)
    except OSError as exc:
        sys.stderr.write(f"evopolicy-mcp: warning: cannot hide the runtime's test suites: {exc}\n")


def private_start(found: runtime.Runtime, scratch_root: str, strict: bool) -> None:
    """Copy the policy runtime ``found`` to a tmpfs of this process's own mount
    namespace, bound over the originals, and start this interpreter again from it:
    from then on every file it maps, and every file its policy processes may read,
    is a private page (:mod:`evopolicy_mcp.kernel.runtime`). Returns only if that
    failed and ``strict`` is off (then the runtime is the shared one, with a warning).
    """
    try:
        copied = runtime.make_private(found, scratch_root)
    except OSError as exc:
        sys.stderr.write(f"evopolicy-mcp: cannot make a private copy of the runtime: {exc}\n")
        if strict:
            os._exit(78)
        sys.stderr.write("evopolicy-mcp: warning: hidden episodes read the shared runtime\n")
        return
    r, w = os.pipe()  # for the new image: a few kilobytes, within a pipe's buffer
    os.write(w, found.to_json().encode())
    os.close(w)
    os.set_inheritable(r, True)
    args = sys.argv[1:6] + [str(r), str(copied.device)]
    head = sys.orig_argv[: len(sys.orig_argv) - len(sys.argv) + 1]  # interpreter, options, -c code
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, head + args)


def check_private(device: int, isolation_json: str | None) -> None:
    """Every file this process maps must be on the private copy (its device)."""
    foreign = runtime.foreign_mappings(device)
    if not foreign:
        return
    shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
    sys.stderr.write(f"evopolicy-mcp: files outside the private runtime are mapped: {shown}\n")
    isolation = sandbox.Isolation.from_json(isolation_json) if isolation_json else None
    if isolation is not None and isolation.strict:
        os._exit(78)


def prepare_sandbox(
    isolation_json: str | None, groups: cgroups.Groups, runtime: list[str] | None = None
) -> sandbox.Sandbox:
    """Probe and prepare the sandbox; a strict request that cannot be met ends the template."""
    isolation = sandbox.Isolation.from_json(isolation_json) if isolation_json else None
    have = groups.available()
    unmade = [name for name, c in sandbox.CGROUP_LAYERS.items() if c not in have]
    found = sandbox.probe().lacking(unmade, "the template could not make its cgroups")
    try:
        box = sandbox.prepare(isolation or sandbox.Isolation(), found, runtime)
    except (sandbox.SandboxError, OSError) as exc:
        sys.stderr.write(f"evopolicy-mcp: cannot isolate policy processes: {exc}\n")
        os._exit(78)
    if box.missing:
        sys.stderr.write(f"evopolicy-mcp: warning: {sandbox.describe_missing(box.missing)}\n")
    return box


if __name__ == "__main__":
    main()
