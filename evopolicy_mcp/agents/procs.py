"""An agent CLI's processes: its session, bounded logs, and stopping all of it.

A CLI starts in a session of its own (``start_new_session``), so its session id
is its pid. The CLI may put its children (the MCP server, shells) in process
groups of their own, which a ``killpg`` would miss; they stay in its session
unless they call ``setsid`` themselves, so stopping signals every process of
the session and of the CLI's group, read from ``/proc``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import IO

__all__ = [
    "LOG_CAP",
    "Pump",
    "blocked_signals",
    "members",
    "run_bounded",
    "signals_interrupt",
    "stop_session",
]

LOG_CAP = 64 << 20  # bytes kept of each of a CLI's stdout and stderr
GONE_SECONDS = 10.0  # how long to wait for killed processes to vanish
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def members(sid: int) -> list[int]:
    """Live processes (zombies excluded) whose session or process group is ``sid``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp session ...; comm may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] != "Z" and sid in (int(fields[2]), int(fields[3])):
            found.append(int(entry.name))
    return found


def _signal_all(sid: int, sig: int) -> None:
    for pid in members(sid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def stop_session(proc: subprocess.Popen[bytes], kill_after: float) -> None:
    """SIGTERM every process of ``proc``'s session, SIGKILL what is left after
    ``kill_after`` seconds, reap ``proc`` and wait (bounded) until none is left."""
    sid = proc.pid
    _signal_all(sid, signal.SIGTERM)
    end = time.monotonic() + kill_after
    while time.monotonic() < end:
        proc.poll()  # reap the CLI itself, or it would count as alive
        if not members(sid):
            break
        time.sleep(0.05)
    _signal_all(sid, signal.SIGKILL)
    proc.wait()
    end = time.monotonic() + GONE_SECONDS
    while members(sid) and time.monotonic() < end:
        time.sleep(0.05)


class Pump(threading.Thread):
    """Copy one pipe into a file, keeping at most ``cap`` bytes. It always drains the
    pipe to its end, even when the file cannot be written, so the CLI never blocks."""

    def __init__(self, pipe: IO[bytes], path: Path, cap: int = LOG_CAP) -> None:
        super().__init__(name=f"agent-log-{path.name}", daemon=True)
        self.pipe, self.path, self.cap = pipe, path, cap
        self.written = 0
        self.dropped = 0

    def run(self) -> None:
        # The stop signals go to the main thread only: a signal this thread took would
        # reach the main thread's handler even while the main thread blocks it.
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        out: IO[bytes] | None = None
        try:
            with contextlib.suppress(OSError):
                out = self.path.open("wb")
            while chunk := os.read(self.pipe.fileno(), 65536):
                keep = chunk[: max(0, self.cap - self.written)] if out is not None else b""
                if keep and out is not None:
                    try:
                        out.write(keep)
                        out.flush()
                    except OSError:
                        out, keep = None, b""
                self.written += len(keep)
                self.dropped += len(chunk) - len(keep)
        finally:
            self.pipe.close()
            if out is not None:
                with contextlib.suppress(OSError):
                    out.close()


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt once, so stopping the launcher
    takes the same path as Ctrl-C; later ones are ignored, as the stop they ask for is
    under way and its clean-up must finish (a second signal can come before
    :func:`blocked_signals` holds them: a parent-death signal and a session's SIGTERM
    arrive together). Main thread only; elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = False

    def interrupt(signum: int, frame: FrameType | None) -> None:
        nonlocal raised
        if not raised:
            raised = True
            raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {s: signal.signal(s, interrupt) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def blocked_signals() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP until the block ends (a clean-up that must finish:
    a second Ctrl-C arrives after it, not in the middle of it)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def run_bounded(
    argv: Sequence[str],
    *,
    cwd: Path | None,
    env: dict[str, str],
    timeout: float,
    pass_fds: Sequence[int] = (),
) -> tuple[int, str]:
    """Run a short command in a session of its own; return its exit code and output.
    At ``timeout`` the whole session is killed (a health check may start servers)."""
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_session(proc, 1.0)
        raise
    if members(proc.pid):  # what it started and left behind
        stop_session(proc, 1.0)
    return proc.returncode, out.decode(errors="replace")
