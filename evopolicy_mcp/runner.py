"""Host side of policy processes: start, talk to, time and tear down one process per episode.

The runner knows nothing of tasks, scoring or MCP. It gives the evaluation a
:class:`PolicyProcess` per episode::

    runner = Runner()
    with runner.open(program_dir, limits, act_seconds=1.0, startup_seconds=10.0,
                     episode_seconds=60.0) as proc:
        proc.start(context)
        action = proc.act(observation)   # raises PolicyFailure
    runner.close()

Processes are forked by a warm template process (:mod:`evopolicy_mcp.zygote`);
frames travel on dedicated pipes, so whatever the program prints cannot break
the protocol, and its output is drained while waiting so a chatty policy
never blocks. Invariants:

- a process is never reused: one per episode;
- when ``open`` returns, the episode's processes are gone (killed, reaped,
  leftovers swept by the template);
- a failure of the runner itself raises :class:`RunnerError`, never
  :class:`PolicyFailure`: host faults are not charged to the policy.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Any

from evopolicy_mcp import frames
from evopolicy_mcp.confine import ProcessLimits

__all__ = ["Failure", "PolicyFailure", "PolicyProcess", "ProcessLimits", "Runner", "RunnerError"]

OUTPUT_HEAD = 2048
OUTPUT_TAIL = 6144
MAX_ACTION_FRAME = 1 << 20
EXIT_GRACE_SECONDS = 5.0
_KILLED_BY_HOST = -1  # sentinel exit status: the host had to kill a process that would not exit


class Failure(StrEnum):
    """Why a policy ended its episode early. A failure is data, not an error."""

    EXCEPTION = "exception"  # make_policy or act raised; traceback excerpt attached
    TIMEOUT = "timeout"  # missed the start-up, per-act or per-episode deadline
    INVALID_ACTION = "invalid_action"  # the adapter rejected the action
    PROTOCOL_ERROR = "protocol_error"  # sent something that is not a valid frame
    RESOURCE_LIMIT = "resource_limit"  # ran into, or was killed by, a memory/CPU/file limit
    CRASHED = "crashed"  # the process died otherwise


class PolicyFailure(Exception):
    def __init__(self, code: Failure, message: str, traceback: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.traceback = traceback or None


class RunnerError(Exception):
    """The runner itself failed (template died, cannot fork): a host fault."""


class _Output:
    """Bounded capture of a policy's stdout+stderr: the head and the tail, and a byte count."""

    __slots__ = ("head", "tail", "total")

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = OUTPUT_HEAD - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * OUTPUT_TAIL:
                del self.tail[: len(self.tail) - OUTPUT_TAIL]

    def text(self) -> str:
        tail = self.tail[-OUTPUT_TAIL:]
        skipped = self.total - len(self.head) - len(tail)
        middle = f"\n...[{skipped} bytes cut]...\n" if skipped > 0 else ""
        return (bytes(self.head) + middle.encode() + bytes(tail)).decode("utf-8", "replace")


def _describe_exit(status: int) -> tuple[Failure, str]:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGXCPU:
            return Failure.RESOURCE_LIMIT, "killed by the CPU-time limit (SIGXCPU)"
        if sig == signal.SIGXFSZ:
            return Failure.RESOURCE_LIMIT, "killed by the file-size limit (SIGXFSZ)"
        if sig == signal.SIGKILL:
            return (
                Failure.RESOURCE_LIMIT,
                "killed (SIGKILL): a resource limit or the CPU-time hard limit",
            )
        return Failure.CRASHED, f"the policy process died from signal {name}"
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    return Failure.CRASHED, f"the policy process exited with code {code} before the episode ended"


class PolicyProcess:
    """One episode's policy process, seen from the host."""

    def __init__(
        self,
        runner: Runner,
        episode: int,
        observations_w: int,
        actions_r: int,
        output_r: int,
        *,
        act_seconds: float,
        startup_seconds: float,
        episode_seconds: float,
        spin: int = 0,
    ) -> None:
        self._runner = runner
        self.episode = episode
        self._obs_w = observations_w
        self._act_r = actions_r
        self._out_r = output_r
        self._reader = frames.FrameReader(MAX_ACTION_FRAME)
        self._output = _Output()
        self._poll = select.poll()
        self._poll.register(actions_r, select.POLLIN)
        self._poll.register(output_r, select.POLLIN)
        self._output_open = True
        self.spin = spin
        if spin:
            os.set_blocking(actions_r, False)
        self.act_seconds = act_seconds
        self.startup_seconds = startup_seconds
        self.started = time.monotonic()
        self.episode_deadline = self.started + episode_seconds

    # -- protocol ------------------------------------------------------------

    def start(self, context: dict[str, Any]) -> None:
        """Send the context; wait until ``make_policy`` has returned."""
        self.send_context(context)
        self.wait_ready()

    def send_context(self, context: dict[str, Any]) -> None:
        self._write(frames.frame(frames.CONTEXT, context))

    def wait_ready(self) -> None:
        self._expect(frames.READY, self.started + self.startup_seconds, "start-up")

    def act(self, observation: Any) -> Any:
        self._write(frames.frame(frames.OBSERVATION, observation))
        return self._expect(frames.ACTION, time.monotonic() + self.act_seconds, "act()")

    def output(self) -> str:
        return self._output.text()

    # -- internals -----------------------------------------------------------

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._obs_w, view) :]
        except BrokenPipeError:
            self._died()

    def _expect(self, kind: int, deadline: float, what: str) -> Any:
        deadline = min(deadline, self.episode_deadline)
        while True:
            try:
                got = self._reader.next()
            except frames.FrameError as exc:
                raise PolicyFailure(
                    Failure.PROTOCOL_ERROR, f"bad frame from the policy: {exc}"
                ) from None
            if got is not None:
                return self._accept(kind, got[0], got[1])
            if self.spin:
                data = spin_read(self._act_r, self.spin)
                if data is not None:
                    if not data:
                        self._died()
                    self._reader.feed(data)
                    continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._timed_out(what)
            for fd, _event in self._poll.poll(max(1, int(remaining * 1000 + 0.999))):
                if fd == self._act_r:
                    data = os.read(fd, 1 << 16)
                    if not data:
                        self._died()
                    self._reader.feed(data)
                else:
                    self._drain_output()

    def _accept(self, expected: int, kind: int, payload: bytes) -> Any:
        try:
            value = frames.decode(payload)
        except frames.FrameError as exc:
            raise PolicyFailure(
                Failure.PROTOCOL_ERROR, f"bad frame from the policy: {exc}"
            ) from None
        if kind == expected:
            return value
        if kind == frames.ERROR and isinstance(value, dict):
            code = {
                "exception": Failure.EXCEPTION,
                "resource_limit": Failure.RESOURCE_LIMIT,
                "invalid_action": Failure.INVALID_ACTION,
            }.get(str(value.get("kind")), Failure.PROTOCOL_ERROR)
            message = str(value.get("message", ""))[:500]
            traceback = str(value.get("traceback", ""))[:5000]
            raise PolicyFailure(code, message, traceback)
        raise PolicyFailure(
            Failure.PROTOCOL_ERROR, f"unexpected frame kind {kind!r} from the policy"
        )

    def _drain_output(self) -> None:
        if not self._output_open:
            return
        try:
            data = os.read(self._out_r, 1 << 16)
        except BlockingIOError:
            return
        if data:
            self._output.feed(data)
        else:
            self._poll.unregister(self._out_r)
            self._output_open = False

    def _timed_out(self, what: str) -> None:
        if time.monotonic() >= self.episode_deadline:
            limit = self.episode_deadline - self.started
            raise PolicyFailure(
                Failure.TIMEOUT, f"the episode exceeded its {limit:g} s wall-clock limit"
            )
        limit = self.startup_seconds if what == "start-up" else self.act_seconds
        raise PolicyFailure(Failure.TIMEOUT, f"{what} did not answer within {limit:g} s")

    def _died(self) -> None:
        """The action pipe closed: tell a crash (the process exited) from a protocol breach."""
        status = self._runner._wait_exit(self.episode, 0.5, kill_after=True)
        if status is _KILLED_BY_HOST:
            raise PolicyFailure(
                Failure.PROTOCOL_ERROR, "the policy closed its action pipe and kept running"
            )
        code, message = _describe_exit(status)
        raise PolicyFailure(code, message)

    def _finish(self) -> None:
        """Kill the process group and collect what it printed; reaping goes on in the template.

        Everything the policy printed before its last answer is already in the
        pipe (its stdout is line-buffered), so a non-blocking drain suffices and
        the next episode need not wait for this one's teardown. ``Runner.settle``
        waits for it.
        """
        self._runner._kill(self.episode)
        self._runner._detach(self.episode)
        while self._output_open and self._poll.poll(0):
            before = self._output.total
            self._drain_output()
            if self._output.total == before:
                break
        for fd in (self._obs_w, self._act_r, self._out_r):
            os.close(fd)


class Runner:
    """Owns the template process and dispatches its exit reports.

    Thread-safe: many evaluation threads may run episodes at once.
    """

    def __init__(self, *, python: str | None = None) -> None:
        self._python = python or sys.executable
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
        host_end, template_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        package_parent = str(Path(__file__).resolve().parent.parent)
        bootstrap = (
            f"import sys; sys.path.insert(0, {package_parent!r}); "
            "from evopolicy_mcp.zygote import main; main()"
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
                ],
                pass_fds=(template_end.fileno(),),
                env=policy_environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                cwd="/",
            )
        except OSError as exc:
            failure.append(exc)
            ready.set()
            return
        finally:
            template_end.close()
        self._control, self._proc = host_end, proc
        ready.set()
        self._dispatch(host_end, proc)

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
                self._changed.notify_all()
        # The template is gone and its children with it: every live episode ends as a host fault.
        proc.wait()
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
            raise RunnerError("the policy template process died or could not fork")
        return status

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
    ) -> Iterator[PolicyProcess]:
        """A fresh policy process for one episode, torn down on exit from the block.

        ``cpu`` pins the process. ``spin`` > 0 makes both sides poll their pipe
        that many times before they sleep: with host and policy on two
        different CPUs a hand-over then costs about 3 us instead of a wake-up
        (tens of us across CPUs, or a context switch and cold caches on one).
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
        try:
            try:
                self._send(
                    {
                        "op": "spawn",
                        "id": episode,
                        "program": str(program_dir),
                        "cpu": cpu,
                        "spin": spin,
                        "limits": limits.__dict__,
                    },
                    [obs_r, act_w, out_w],
                )
            finally:
                for fd in (obs_r, act_w, out_w):
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
            )
            yield proc
        finally:
            if proc is not None:
                proc._finish()
            else:
                for fd in (obs_w, act_r, out_r):
                    os.close(fd)
                with self._changed:  # never spawned: nothing will be reported
                    self._live.discard(episode)
                    self._changed.notify_all()


def spin_read(fd: int, tries: int) -> bytes | None:
    """Read a non-blocking pipe, retrying ``tries`` times; None if nothing came."""
    for _ in range(tries):
        try:
            return os.read(fd, 1 << 16)
        except BlockingIOError:
            pass
    return None


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
