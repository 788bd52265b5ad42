"""Host side of policy processes: start, talk to, time and tear down one process per episode.

The runner knows nothing of tasks, scoring or MCP. It gives the evaluation a
:class:`PolicyProcess` per episode::

    runner = Runner()
    with runner.open(program_dir, limits, act_seconds=1.0, startup_seconds=10.0,
                     episode_seconds=60.0) as proc:
        proc.start(context)
        action = proc.act(observation)   # raises PolicyFailure
    runner.close()

Processes are forked by a warm template process (:mod:`evopolicy_mcp.kernel.zygote`);
frames travel on dedicated pipes, so whatever the program prints cannot break
the protocol, and its output is drained while waiting so a chatty policy
never blocks. Invariants:

- a process is never reused: one per episode;
- when ``open`` returns, the episode's processes are killed; the template
  reaps them and sweeps leftovers, and ``settle`` waits until it has;
- a failure of the runner itself raises :class:`RunnerError`, never
  :class:`PolicyFailure`: host faults are not charged to the policy.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from evopolicy_mcp.kernel import cgroups, mailbox
from evopolicy_mcp.kernel.cgroups import DEFAULT_MAX_PROCESSES
from evopolicy_mcp.kernel.limits import ProcessLimits
from evopolicy_mcp.kernel.mailbox import Mailbox
from evopolicy_mcp.kernel.sandbox import Isolation
from evopolicy_mcp.runner.process import (
    _KILLED_BY_HOST,
    EXIT_GRACE_SECONDS,
    Failure,
    PolicyFailure,
    PolicyProcess,
    RunnerError,
)

TEMPLATE_UNISOLATED = 78  # the template's exit status when strict isolation cannot be met
_PROGRAM_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC

__all__ = ["Failure", "PolicyFailure", "PolicyProcess", "ProcessLimits", "Runner", "RunnerError"]


class Runner:
    """Owns the template process and dispatches its exit reports.

    Thread-safe: many evaluation threads may run episodes at once.
    """

    def __init__(
        self,
        *,
        python: str | None = None,
        isolation: Isolation | None = None,
        max_processes: int = DEFAULT_MAX_PROCESSES,
    ) -> None:
        self._python = python or sys.executable
        self.isolation = isolation or Isolation()
        self.max_processes = max_processes
        self._template_exit: int | None = None
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._control: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._next_id = 0
        # Episode bookkeeping, guarded by _changed: processes whose exit the template has not
        # reported yet, reported statuses somebody may still ask for, and episodes nobody will.
        self._changed = threading.Condition(self._lock)
        self._live: set[int] = set()
        self._exits: dict[int, int | None] = {}
        self._oom_killed: set[int] = set()  # reported episodes whose memory cgroup OOM-killed
        self._confined: set[int] = set()  # reported episodes the template saw confined
        self._detached: set[int] = set()
        self._closed = False
        self._keeper: threading.Thread | None = None

    # -- template lifecycle --------------------------------------------------

    def _ensure_started(self) -> socket.socket:
        with self._lock:
            if self._closed:
                raise RunnerError("the runner is closed")
            if self._control is not None and self._proc is not None and self._proc.poll() is None:
                return self._control
            ready = threading.Event()
            failure: list[BaseException] = []
            # The parent-death signal fires when the *thread* that forked the template ends,
            # so the template is forked by a thread that lives as long as the runner.
            self._keeper = threading.Thread(
                target=self._keep, args=(ready, failure), name="evopolicy-template", daemon=True
            )
            self._keeper.start()
            ready.wait()
            if failure:
                raise RunnerError(f"cannot start the policy template process: {failure[0]}")
            assert self._control is not None
            return self._control

    def _keep(self, ready: threading.Event, failure: list[BaseException]) -> None:
        # Started by whichever thread first needs a policy process, perhaps a worker pinned
        # to one CPU: this thread, and the template it forks, take the process's CPUs back.
        try:
            os.sched_setaffinity(0, os.sched_getaffinity(os.getpid()))
        except OSError:
            pass
        host_end, template_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The paths policies must not read go through a pipe, not the command line, which
        # every policy process inherits (/proc/self/cmdline); only a short-lived child of
        # the template reads them (zygote.runtime_grants).
        hidden_r, hidden_w = os.pipe()
        try:
            os.write(hidden_w, json.dumps(list(self.isolation.hidden)).encode())
        finally:
            os.close(hidden_w)
        # Made here, so that it goes even if the template is killed before it can remove it.
        scratch_root = tempfile.mkdtemp(prefix="evopolicy-scratch-")
        package_parent = str(Path(__file__).resolve().parents[2])
        bootstrap = (
            f"import sys; sys.path.insert(0, {package_parent!r}); "
            "from evopolicy_mcp.kernel.zygote import main; main()"
        )
        try:
            proc = subprocess.Popen(
                [
                    self._python,
                    "-s",
                    "-P",
                    "-c",
                    bootstrap,
                    str(template_end.fileno()),
                    str(os.getpid()),
                    replace(self.isolation, hidden=()).to_json(),
                    str(self.max_processes),
                    scratch_root,
                    str(hidden_r),
                ],
                pass_fds=(template_end.fileno(), hidden_r),
                env=policy_environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                cwd="/",
            )
        except OSError as exc:
            shutil.rmtree(scratch_root, ignore_errors=True)
            failure.append(exc)
            ready.set()
            return
        finally:
            template_end.close()
            os.close(hidden_r)
        # The template moves itself into its cgroups before it forks anything.
        self._control, self._proc = host_end, proc
        ready.set()
        self._dispatch(host_end, proc)
        # The template is gone. Killed outright, it took its episode leaders along but
        # not what they forked, nor its scratch root: both go now.
        cgroups.kill_runner(os.getpid(), proc.pid)
        shutil.rmtree(scratch_root, ignore_errors=True)
        # Orphans killed here are reaped by init, which may take seconds: their groups
        # go once it has (close() tries for a moment only).
        for _ in range(600):
            if cgroups.remove_runner(os.getpid(), proc.pid):
                break
            time.sleep(0.1)

    def _dispatch(self, control: socket.socket, proc: subprocess.Popen[bytes]) -> None:
        while True:
            try:
                data = control.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            msg = json.loads(data)
            episode = int(msg["id"])
            with self._changed:
                self._live.discard(episode)
                if episode in self._detached:
                    self._detached.discard(episode)
                else:
                    self._exits[episode] = msg.get("status") if msg["op"] == "exited" else None
                    if msg.get("oom"):
                        self._oom_killed.add(episode)
                    if msg.get("confined"):
                        self._confined.add(episode)
                self._changed.notify_all()
        # The template is gone and its children with it: every live episode ends as a host fault.
        self._template_exit = proc.wait()
        with self._changed:
            if self._control is control:
                self._control = None
            for episode in self._live - self._detached:
                self._exits[episode] = None
            self._live.clear()
            self._detached.clear()
            self._changed.notify_all()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            control, proc = self._control, self._proc
        if control is not None:
            try:
                control.send(b'{"op": "exit"}')
            except OSError:
                pass
        if proc is not None:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if control is not None:
            control.close()
        if proc is not None:
            for _ in range(50):  # the last policy processes may take a moment to die
                if cgroups.remove_runner(os.getpid(), proc.pid):
                    break
                time.sleep(0.02)

    @property
    def process_limit(self) -> int | None:
        """The cap on the template's processes, or None where no pids cgroup is available."""
        proc = self._proc
        if proc is None or cgroups.runner_processes(os.getpid(), proc.pid) is None:
            return None
        return self.max_processes

    @property
    def template_pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # -- episodes ------------------------------------------------------------

    def _send(self, msg: dict[str, Any], fds: list[int] | None = None) -> None:
        control = self._ensure_started()
        data = json.dumps(msg).encode()
        try:
            with self._send_lock:
                if fds:
                    socket.send_fds(control, [data], fds)
                else:
                    control.send(data)
        except OSError as exc:
            raise RunnerError(f"the policy template process is not reachable: {exc}") from exc

    def _kill(self, episode: int) -> None:
        try:
            self._send({"op": "kill", "id": episode})
        except RunnerError:
            pass  # a dead template took its children with it

    def _detach(self, episode: int) -> None:
        with self._changed:
            if episode in self._live:
                self._detached.add(episode)
            else:
                self._exits.pop(episode, None)
            self._oom_killed.discard(episode)
            self._confined.discard(episode)

    def _wait_exit(self, episode: int, timeout: float, *, kill_after: bool = False) -> int:
        """The exit status of an episode's process, as reported by the template.

        With ``kill_after``, a process still alive after ``timeout`` is killed and
        ``_KILLED_BY_HOST`` is returned.
        """
        with self._changed:
            exited = self._changed.wait_for(lambda: episode not in self._live, timeout)
        if not exited:
            if not kill_after:
                raise RunnerError(f"episode process {episode} did not exit after being killed")
            self._kill(episode)
            self._wait_exit(episode, EXIT_GRACE_SECONDS)
            return _KILLED_BY_HOST
        with self._changed:
            status = self._exits.pop(episode, None)
        if status is None:
            raise RunnerError(self._template_failure())
        return status

    def _wait_gone(self, episode: int, timeout: float) -> None:
        """Wait (at most ``timeout``) until the template reports the episode's process gone."""
        with self._changed:
            self._changed.wait_for(lambda: episode not in self._live, timeout)

    def _confined_seen(self, episode: int) -> bool:
        """Whether the episode's process told the template it was confined (once reported).

        It says so on its socket to the template right before that socket and the
        rest of what it inherited are closed and its program runs: unlike a frame
        on its pipe, a program can neither take that back nor fake its absence."""
        with self._changed:
            return episode in self._confined

    def _oom_kill_seen(self, episode: int) -> bool:
        """Whether the episode's memory cgroup OOM-killed one of its processes (once reported)."""
        with self._changed:
            return episode in self._oom_killed

    def _template_failure(self) -> str:
        if self._template_exit == TEMPLATE_UNISOLATED:
            return (
                "policy processes cannot get the isolation this server requires (strict); "
                "run `evopolicy-mcp doctor` to see which layer is missing"
            )
        if self._template_exit is not None:
            return f"the policy template process exited with status {self._template_exit}"
        return "the policy template process could not start a policy process"

    def settle(self, timeout: float = 30.0) -> None:
        """Wait until every episode process this runner started has been reaped."""
        with self._changed:
            if not self._changed.wait_for(lambda: not self._live, timeout):
                raise RunnerError(
                    f"{len(self._live)} policy processes were not reaped in {timeout:g} s"
                )

    @contextmanager
    def open(
        self,
        program_dir: str | os.PathLike[str],
        limits: ProcessLimits,
        *,
        act_seconds: float,
        startup_seconds: float,
        episode_seconds: float,
        cpu: int | None = None,
        spin: int = 0,
        shared: bool = False,
    ) -> Iterator[PolicyProcess]:
        """A fresh policy process for one episode, torn down on exit from the block.

        ``cpu`` pins the process. ``spin`` > 0 makes both sides poll their pipe
        that many times before they sleep: with host and policy on two
        different CPUs a hand-over then costs about 3 us instead of a wake-up
        (tens of us across CPUs, or a context switch and cold caches on one).
        ``shared``: other policy processes spin on the same CPU, so this one yields
        between its looks.
        """
        with self._changed:
            self._next_id += 1
            episode = self._next_id
            self._live.add(episode)
        obs_r, obs_w = os.pipe2(os.O_CLOEXEC)
        act_r, act_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(out_r, False)
        proc = None
        box = None
        aborted = False
        try:
            # The program goes as a directory descriptor: no path (which names the
            # records) and no digest reaches the template, whose memory later spares
            # inherit.
            passed = [obs_r, act_w, out_w]
            try:
                try:
                    passed.append(os.open(program_dir, _PROGRAM_FLAGS))
                except OSError as exc:
                    raise RunnerError(f"cannot open the program's folder: {exc.strerror}") from None
                if spin and mailbox.supported():  # spinning hand-overs go through shared memory
                    passed.append(mailbox.create())
                    box = Mailbox(passed[-1], host=True)
                self._send(
                    {
                        "op": "spawn",
                        "id": episode,
                        "cpu": cpu,
                        "spin": spin,
                        "shared": shared,
                        "limits": limits.__dict__,
                    },
                    passed,
                )
            finally:
                for fd in passed:
                    os.close(fd)
            proc = PolicyProcess(
                self,
                episode,
                obs_w,
                act_r,
                out_r,
                act_seconds=act_seconds,
                startup_seconds=startup_seconds,
                episode_seconds=episode_seconds,
                spin=spin,
                box=box,
            )
            yield proc
        except BaseException:
            # The evaluation stops here (a host or adapter fault, or it was closed while
            # this process started): whatever the host does next, say removing the
            # program's snapshot, must not happen under a process still starting from it.
            aborted = True
            raise
        finally:
            if proc is not None:
                proc._finish(wait=aborted)
            else:
                for fd in (obs_w, act_r, out_r):
                    os.close(fd)
                if box is not None:
                    box.close()
                with self._changed:  # never spawned: nothing will be reported
                    self._live.discard(episode)
                    self._changed.notify_all()


def policy_environment() -> dict[str, str]:
    """The whole environment of policy processes: nothing of the operator's.

    No credentials, tokens or ``HOME`` reach untrusted code; BLAS stays
    single-threaded so small address-space limits hold and episodes stay
    deterministic.
    """
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
    }
