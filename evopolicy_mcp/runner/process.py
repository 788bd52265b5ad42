"""One episode's policy process as the host sees it: frames out and in, deadlines, output.

Whatever the program prints cannot break the protocol (frames travel on
their own pipes), and its output is drained while the host waits, so a
chatty policy never blocks. Every way a policy can go wrong ends in one
:class:`PolicyFailure` with a failure code; a fault of the runner itself is
a :class:`RunnerError`, never charged to the policy.
"""

from __future__ import annotations

import os
import select
import signal
import time
from enum import StrEnum
from typing import Any, Protocol

from evopolicy_mcp.kernel import frames, mailbox
from evopolicy_mcp.kernel.mailbox import Mailbox

__all__ = ["PENDING", "Failure", "PolicyFailure", "PolicyProcess", "RunnerError"]


class _Exits(Protocol):
    """What a policy process asks of the runner that forked it (its exit, as the template saw it)."""

    def _kill(self, episode: int) -> None: ...
    def _detach(self, episode: int) -> None: ...
    def _wait_exit(self, episode: int, timeout: float, *, kill_after: bool = False) -> int: ...
    def _wait_gone(self, episode: int, timeout: float) -> None: ...
    def _confined_seen(self, episode: int) -> bool: ...
    def _oom_kill_seen(self, episode: int) -> bool: ...


OUTPUT_HEAD = 2048
OUTPUT_TAIL = 6144
MAX_ACTION_FRAME = 1 << 20
EXIT_GRACE_SECONDS = 5.0
_WAKE = frames.frame(frames.WAKE)
_KILLED_BY_HOST = -1  # sentinel exit status: the host had to kill a process that would not exit
PENDING: Any = object()  # PolicyProcess.poll: the awaited answer has not come yet


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


def _bad_frame(exc: frames.FrameError) -> PolicyFailure:
    return PolicyFailure(Failure.PROTOCOL_ERROR, f"bad frame from the policy: {exc}")


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


def _describe_exit(status: int, oom_killed: bool = False) -> tuple[Failure, str]:
    if oom_killed:
        # The memory cgroup killed the leader, or one of its processes and then the
        # leader died of it in some other way: either way the episode ran out of memory.
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        return (
            Failure.RESOURCE_LIMIT,
            f"{'killed' if killed else 'ended after a process of it was killed'} by the "
            "episode's memory limit (its address-space limit plus its scratch quota, for "
            "all its processes, memfds and scratch files together)",
        )
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
        runner: _Exits,
        episode: int,
        observations_w: int,
        actions_r: int,
        output_r: int,
        *,
        act_seconds: float,
        startup_seconds: float,
        episode_seconds: float,
        spin: int = 0,
        box: Mailbox | None = None,
    ) -> None:
        self._runner = runner
        self._box = box
        self.episode = episode
        self._obs_w = observations_w
        self._act_r = actions_r
        self._out_r = output_r
        self._reader = frames.FrameReader(MAX_ACTION_FRAME)
        self._output = _Output()
        self._poll = select.poll()
        self._poll.register(actions_r, select.POLLIN)
        self._poll.register(output_r, select.POLLIN)
        self._write_poll = select.poll()  # room in the observation pipe, or output to drain
        self._write_poll.register(observations_w, select.POLLOUT)
        self._write_poll.register(output_r, select.POLLIN)
        os.set_blocking(observations_w, False)
        self._output_open = True
        self.spin = spin
        os.set_blocking(actions_r, False)  # reads follow a poll or may find nothing (poll())
        if spin:
            self._spin_poll = select.poll()
            self._spin_poll.register(actions_r, select.POLLIN)
        self.act_seconds = act_seconds
        self.startup_seconds = startup_seconds
        self.started = time.monotonic()
        self.episode_seconds = episode_seconds
        self.episode_deadline = self.started + episode_seconds  # later by excuse()
        # What receive() or poll() waits for: (frame kind, deadline, what for a timeout).
        self._want = (frames.READY, self.started + startup_seconds, "start-up")
        self._on_pipe = False  # the mailbox said the next message is on the pipe

    # -- protocol ------------------------------------------------------------

    def start(self, context: dict[str, Any]) -> None:
        """Send the context; wait until ``make_policy`` has returned."""
        self.send_context(context)
        self.wait_ready()

    def send_context(self, context: dict[str, Any]) -> None:
        self._write(frames.frame(frames.CONTEXT, context))

    def wait_ready(self) -> None:
        # Start-up takes milliseconds, and this CPU has work meanwhile: the template serves
        # the spawn and forks the next spare there. A worker that spun, even yielding at
        # every try, left it only half the CPU (the scheduler shares a CPU between two
        # runnable tasks, yield or not): sleeping until READY made episodes 1.5-2 ms shorter.
        self.expect_ready()
        self.receive()

    def act(self, observation: Any) -> Any:
        self.post(observation)
        return self.receive()

    def post(self, observation: Any) -> None:
        """Send an observation; its action is then awaited with :meth:`receive` or
        :meth:`poll`."""
        deadline = time.monotonic() + self.act_seconds  # for sending it and the answer
        self._write(frames.frame(frames.OBSERVATION, observation), deadline)
        self._want = (frames.ACTION, deadline, "act()")

    def expect_ready(self) -> None:
        """Await READY (``make_policy`` has returned) next, with :meth:`receive` or
        :meth:`poll`."""
        self._want = (frames.READY, self.started + self.startup_seconds, "start-up")

    def receive(self) -> Any:
        """Wait for what is awaited (READY, or the action for the last observation):
        its value, or a :class:`PolicyFailure`."""
        kind, deadline, what = self._want
        if kind != frames.ACTION:
            # Start-up takes milliseconds, and this CPU has work meanwhile (see wait_ready).
            return self._expect(kind, deadline, what, spin=0)
        box = self._box
        if box is not None:
            # The usual hand-over: the ACTION comes in the mailbox while spinning.
            got = box.spin(self.spin * mailbox.CHECKS_PER_TRY)
            if got is None or got == mailbox.ON_PIPE:
                self._on_pipe = got is not None
                return self._expect(frames.ACTION, deadline, "act()", spin=0)
            kind, value = self._parse(got)
            return self._answer(frames.ACTION, kind, value)
        data = b""
        if self.spin and not self._reader.pending:
            # The usual hand-over: while spinning, one read brings exactly one ACTION frame.
            spun = frames.spin_read(self._act_r, self._spin_poll, self.spin)
            if spun:
                whole = frames.whole_frame(spun, MAX_ACTION_FRAME)
                if whole is not None and whole[0] == frames.ACTION:
                    return self._accept(frames.ACTION, frames.ACTION, whole[1])
                data = spun
            elif spun is not None:
                self._died()
        return self._expect(frames.ACTION, deadline, "act()", data=data)

    def poll(self, look: bool = False) -> Any:
        """What :meth:`receive` waits for if it has come, else :data:`PENDING`; never waits.

        A plain poll is a look at the mailbox, a load from memory. With ``look``
        (which a caller asks for now and then, and before it sleeps) the pipe is read
        too, and the policy's output drained: that is where a death, a WAKE or a frame
        too large for the mailbox shows, and a missed deadline raises a timeout.
        Raises :class:`PolicyFailure` as :meth:`receive` does.
        """
        kind, deadline, what = self._want
        if self._box is not None and not self._on_pipe:
            answer = self._from_box(kind, self._box.take())
            if answer is not PENDING or not (look or self._on_pipe):
                return answer
        got_frame = self._pipe_frame()
        if got_frame is None:
            got_frame = self._pipe_frame(self._read_pipe())
        if got_frame is not None:
            return self._accept(kind, got_frame[0], got_frame[1])
        self._drain_output()
        if self._box is not None and not self._on_pipe:
            # It may have come since the first look (its WAKE did).
            answer = self._from_box(kind, self._box.take())
            if answer is not PENDING or self._on_pipe:
                return answer
        if time.monotonic() >= min(deadline, self.episode_deadline):
            self._timed_out(what)
        return PENDING

    def _from_box(self, kind: int, got: bytes | None) -> Any:
        """The answer in a message from the mailbox, or PENDING: none came, or the
        word that it waits on the pipe (which :attr:`_on_pipe` then says)."""
        if got is None:
            return PENDING
        if got == mailbox.ON_PIPE:
            self._on_pipe = True
            return PENDING
        got_kind, value = self._parse(got)
        return self._answer(kind, got_kind, value)

    def _read_pipe(self) -> bytes:
        """What the action pipe holds now (b"" if nothing); its end is the process's."""
        try:
            data = os.read(self._act_r, 1 << 16)
        except BlockingIOError:
            return b""
        if not data:
            self._died()
        return data

    def _pipe_frame(self, data: bytes = b"") -> tuple[int, bytes] | None:
        """The next whole frame from the pipe (``data`` just read, and what came before
        it), None if none is whole yet. With the mailbox, a WAKE is skipped, and a frame
        is the message the mailbox said waits on the pipe."""
        box = self._box
        try:
            got = self._reader.take(data) if data else self._reader.next()
            while got is not None and box is not None and got[0] == frames.WAKE:
                got = self._reader.next()
        except frames.FrameError as exc:
            raise _bad_frame(exc) from None
        if got is not None and box is not None:
            box.took_from_pipe()
            self._on_pipe = False
        return got

    def excuse(self, seconds: float) -> None:
        """Move this episode's deadlines ``seconds`` later: time its host spent on others."""
        kind, deadline, what = self._want
        self._want = (kind, deadline + seconds, what)
        self.episode_deadline += seconds

    def doze(self) -> bool:
        """Before the caller sleeps on :meth:`wake_fds`: say so to the policy (its next
        message then wakes the pipe); False, awake again, if a message came meanwhile."""
        if self._box is None or self._on_pipe:
            return True
        return self._box.doze()

    def undoze(self) -> None:
        if self._box is not None:
            self._box.sleeping(False)

    def wake_fds(self) -> tuple[int, ...]:
        """What to sleep on: the action pipe, and the output pipe while it is open."""
        return (self._act_r, self._out_r) if self._output_open else (self._act_r,)

    def seconds_left(self) -> float:
        """Until the deadline of what is awaited."""
        return min(self._want[1], self.episode_deadline) - time.monotonic()

    def output(self) -> str:
        return self._output.text()

    # -- internals -----------------------------------------------------------

    def _write(self, data: bytes, deadline: float | None = None) -> None:
        box = self._box
        if box is None:
            self._write_pipe(data, deadline)
            return
        if box.post(data, lambda frame: self._write_pipe(frame, deadline)):
            try:
                os.write(self._obs_w, _WAKE)
            except BlockingIOError:
                pass  # the pipe is full: the sleeper has plenty to wake it
            except BrokenPipeError:
                self._died()

    def _write_pipe(self, data: bytes, deadline: float | None = None) -> None:
        """Write ``data`` whole. The pipe is non-blocking: a policy that stops reading
        what the host sends gets until ``deadline`` (by default the act deadline from
        now) to start again, then a timeout, instead of holding the host in a write."""
        view = memoryview(data)
        try:
            while view:
                try:
                    view = view[os.write(self._obs_w, view) :]
                    continue
                except BlockingIOError:
                    pass
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self.act_seconds
                deadline = min(deadline, self.episode_deadline)
                if now >= deadline:
                    if now >= self.episode_deadline:
                        self._timed_out("the episode")
                    raise PolicyFailure(
                        Failure.TIMEOUT,
                        f"the policy stopped reading what the host sends ({self.act_seconds:g} s "
                        "without taking any of it)",
                    )
                ms = max(1, int((deadline - now) * 1000 + 0.999))
                for fd, _event in self._write_poll.poll(ms):
                    if fd == self._out_r:
                        self._drain_output()  # it may be stuck writing its output
        except BrokenPipeError:
            self._died()

    def _expect(
        self,
        kind: int,
        deadline: float,
        what: str,
        spin: int | None = None,
        data: bytes = b"",  # bytes read and not yet given to the frame reader
    ) -> Any:
        deadline = min(deadline, self.episode_deadline)
        spin = self.spin if spin is None else spin
        box = self._box
        nap = mailbox.NAP_SECONDS
        while True:
            if box is not None and not self._on_pipe:
                answer = self._from_box(kind, box.spin(max(1, spin * mailbox.CHECKS_PER_TRY)))
                spin = 0  # spun once: from now on, one look at the mailbox per wake-up
                if answer is not PENDING:
                    return answer
            got_frame = self._pipe_frame(data)
            data = b""
            if got_frame is not None:
                return self._accept(kind, got_frame[0], got_frame[1])
            if spin and box is None:
                spun = frames.spin_read(self._act_r, self._spin_poll, spin)
                spin = 0
                if spun is not None:
                    if not spun:
                        self._died()
                    data = spun
                    continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if box is not None and not self._on_pipe:
                    # It may have come since the look above (its WAKE may be what woke us).
                    answer = self._from_box(kind, box.take())
                    if answer is not PENDING:
                        return answer
                self._timed_out(what)
            if box is not None and not self._on_pipe:
                # Asleep, the policy's next message wakes us through the pipe; a wake-up
                # lost to store/load reordering costs one nap, not a hang.
                if not box.doze():
                    continue
                remaining = min(remaining, nap)
                nap = min(2 * nap, mailbox.MAX_NAP_SECONDS)
            events = self._poll.poll(max(1, int(remaining * 1000 + 0.999)))
            if box is not None:
                box.sleeping(False)
            for fd, _event in events:
                if fd == self._act_r:
                    data = self._read_pipe()
                else:
                    self._drain_output()

    @staticmethod
    def _parse(data: bytes) -> tuple[int, Any]:
        """``(kind, value)`` of a message that must be exactly one frame."""
        try:
            return frames.read_frame(data, MAX_ACTION_FRAME)
        except frames.FrameError as exc:
            raise _bad_frame(exc) from None

    def _accept(self, expected: int, kind: int, payload: bytes) -> Any:
        try:
            value = frames.decode(payload)
        except frames.FrameError as exc:
            raise _bad_frame(exc) from None
        return self._answer(expected, kind, value)

    @staticmethod
    def _answer(expected: int, kind: int, value: Any) -> Any:
        """``value`` if the frame is of the ``expected`` kind; the policy's reported error,
        or a protocol error, if not."""
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
            self._write_poll.unregister(self._out_r)
            self._output_open = False

    def _timed_out(self, what: str) -> None:
        if time.monotonic() >= self.episode_deadline:
            limit = self.episode_seconds
            raise PolicyFailure(
                Failure.TIMEOUT, f"the episode exceeded its {limit:g} s wall-clock limit"
            )
        limit = self.startup_seconds if what == "start-up" else self.act_seconds
        raise PolicyFailure(Failure.TIMEOUT, f"{what} did not answer within {limit:g} s")

    def _died(self) -> None:
        """The action pipe closed: tell a crash (the process exited) from a protocol breach.

        A process that died before it was confined (its program had not run) died
        of the host's fault, never charged to the policy. It tells the template it is
        confined right before its program runs, where no program can unsay it."""
        status = self._runner._wait_exit(self.episode, 0.5, kill_after=True)
        if not self._runner._confined_seen(self.episode):
            raise RunnerError(
                f"a policy process died before it was confined (wait status {status}); "
                "see the server's stderr or run `evopolicy-mcp doctor`"
            )
        if status is _KILLED_BY_HOST:
            raise PolicyFailure(
                Failure.PROTOCOL_ERROR, "the policy closed its action pipe and kept running"
            )
        code, message = _describe_exit(status, self._runner._oom_kill_seen(self.episode))
        raise PolicyFailure(code, message)

    def _finish(self, wait: bool = False) -> None:
        """Kill the process group and collect what it printed; reaping goes on in the template.

        Everything the policy printed before its last answer is already in the
        pipe (its stdout is line-buffered), so a non-blocking drain suffices and
        the next episode need not wait for this one's teardown. ``Runner.settle``
        waits for it; ``wait`` waits (a moment at most) for this one.
        """
        self._runner._kill(self.episode)
        if wait:
            self._runner._wait_gone(self.episode, EXIT_GRACE_SECONDS)
        self._runner._detach(self.episode)
        while self._output_open and self._poll.poll(0):
            before = self._output.total
            self._drain_output()
            if self._output.total == before:
                break
        for fd in (self._obs_w, self._act_r, self._out_r):
            os.close(fd)
        if self._box is not None:
            self._box.close()
