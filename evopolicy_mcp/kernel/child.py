"""The loop inside a policy process: import the program, build the policy, answer observations.

Runs after :func:`evopolicy_mcp.kernel.confine.enter_episode`. Everything the program
does wrong becomes one ERROR frame the host turns into a failure code, with a
traceback excerpt whose file names are relative to the program (no host path
leaves through it).
"""

from __future__ import annotations

import os
import select
import signal
import sys
import traceback
import types
from typing import Any, NoReturn

from evopolicy_mcp.kernel import confine, frames
from evopolicy_mcp.kernel.confine import FD_ACTIONS, FD_OBSERVATIONS
from evopolicy_mcp.kernel.mailbox import (
    CHECKS_PER_TRY,
    MAX_NAP_SECONDS,
    NAP_SECONDS,
    ON_PIPE,
    Mailbox,
)
from evopolicy_mcp.policy import PolicyContext

__all__ = ["run_policy"]

TRACEBACK_CHARS = 4000
MESSAGE_CHARS = 500


_BOX: Mailbox | None = None  # the episode's mailbox, when the host spins for its answers
_SHARED = False  # other policy processes spin on this CPU too: let them run between looks
_WAKE = frames.frame(frames.WAKE)
_SPIN_POLL = select.poll()


def _send(kind: int, value: Any = None) -> None:
    _write(frames.frame(kind, value))


def _write(data: bytes) -> None:
    box = _BOX
    if box is None:
        _write_pipe(data)
        return
    if box.post(data, _write_pipe):
        _write_pipe(_WAKE)


def _write_pipe(data: bytes) -> None:
    written = os.write(FD_ACTIONS, data)
    if written < len(data):  # a frame larger than the pipe's buffer
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(FD_ACTIONS, view) :]


def _receive(reader: frames.FrameReader, spin: int) -> tuple[int, Any]:
    if _BOX is not None:
        return _receive_boxed(_BOX, reader, spin)
    chunk: bytes | None = None
    while True:
        got = reader.take(chunk) if chunk else reader.next()
        if got is not None:
            kind, payload = got
            return kind, frames.decode(payload)
        chunk = frames.spin_read(FD_OBSERVATIONS, _SPIN_POLL, spin)
        if chunk is None:
            select.select([FD_OBSERVATIONS], [], [])
            try:
                chunk = os.read(FD_OBSERVATIONS, 1 << 16)
            except BlockingIOError:
                continue
        if not chunk:
            _exit(0)  # the host closed the pipe: the episode is over


def _receive_boxed(box: Mailbox, reader: frames.FrameReader, spin: int) -> tuple[int, Any]:
    """The next host message from the mailbox, or from the pipe when it says so."""
    tries = max(1, spin * CHECKS_PER_TRY)
    on_pipe = False
    nap = NAP_SECONDS
    chunk: bytes | None = None
    while True:
        if not on_pipe:
            if _SHARED and tries > 1:
                # Another episode's policy process may have its observation already: a
                # yield lets it answer (a few microseconds) instead of waiting for this
                # one's time slice to run out.
                got = None
                for _ in range(tries // CHECKS_PER_TRY):
                    got = box.spin(CHECKS_PER_TRY)
                    if got is not None:
                        break
                    os.sched_yield()
            else:
                got = box.spin(tries)
            tries = 1
            if got == ON_PIPE:
                on_pipe = True
            elif got is not None:
                return frames.read_frame(got, reader.max_frame)
        frame = reader.take(chunk) if chunk else reader.next()
        chunk = None
        if frame is not None:
            if frame[0] == frames.WAKE:
                continue
            box.took_from_pipe()
            return frame[0], frames.decode(frame[1])
        if not on_pipe and not box.doze():  # asleep, the host's next message wakes us
            continue
        ready, _, _ = select.select([FD_OBSERVATIONS], [], [], None if on_pipe else nap)
        nap = min(2 * nap, MAX_NAP_SECONDS)
        box.sleeping(False)
        if not ready:
            continue
        try:
            chunk = os.read(FD_OBSERVATIONS, 1 << 16)
        except BlockingIOError:
            chunk = None
            continue
        if not chunk:
            _exit(0)  # the host closed the pipe: the episode is over


def _clean_traceback(exc: BaseException, program_dir: str) -> str:
    prefix = program_dir.rstrip("/") + "/"
    lines = ["Traceback (most recent call last):"]
    for entry in traceback.extract_tb(exc.__traceback__):
        if entry.filename.startswith(prefix):
            name = entry.filename[len(prefix) :]
        elif entry.filename == __file__:
            continue  # the runner's own frames say nothing about the program
        else:
            # Library frames keep their last two path parts: enough to recognise, no host layout.
            name = "<python>/" + "/".join(entry.filename.split("/")[-2:])
        lines.append(f'  File "{name}", line {entry.lineno}, in {entry.name}')
        if entry.line:
            lines.append(f"    {entry.line.strip()}")
    try:
        lines += [line.rstrip("\n") for line in traceback.format_exception_only(type(exc), exc)]
    except Exception:
        lines.append(_describe(exc))
    text = "\n".join(lines).replace(prefix, "")
    if len(text) > TRACEBACK_CHARS:
        text = text[:1000] + "\n...[cut]...\n" + text[-(TRACEBACK_CHARS - 1000) :]
    return text


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:  # an exception whose __str__ raises is still the program's exception
        return f"{type(exc).__name__}: <unprintable {type(exc).__name__}>"


def _fail(kind: str, where: str, exc: BaseException, program_dir: str) -> NoReturn:
    message = f"{where}: {_describe(exc)}".replace(program_dir.rstrip("/") + "/", "")
    _send(
        frames.ERROR,
        {
            "kind": kind,
            "message": message[:MESSAGE_CHARS],
            "traceback": _clean_traceback(exc, program_dir),
        },
    )
    _exit(0)


def _exit(code: int) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


def _load(program_dir: str) -> Any:
    """``policy.py`` as the module ``policy``, its folder first on ``sys.path`` for helpers.

    Read, compiled and run directly: the import system's loader machinery would
    cost a fresh process about a millisecond of first-touch page copies."""
    sys.path.insert(0, program_dir)
    path = os.path.join(program_dir, "policy.py")
    with open(path, "rb") as f:
        code = compile(f.read(), path, "exec", dont_inherit=True)
    module = types.ModuleType("policy")
    module.__file__ = path
    sys.modules["policy"] = module
    exec(code, module.__dict__)
    return module


def warm_up() -> None:
    """Run the start of a policy process's path once in the template, so lazily built
    caches exist before the fork and each episode copies fewer pages."""
    frames.decode(frames.encode({"a": [1, 2.0, None, True, "s", b"b"]})[0:])
    PolicyContext(task_id="t", observation_space={}, action_space={})
    confine.prctl(confine.PR_GET_DUMPABLE)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.getsignal(sig))
    fd = os.open(os.devnull, os.O_WRONLY)
    try:
        open(fd, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False).close()
    finally:
        os.close(fd)
    exec(compile(b"def make_policy(context):\n    return None\n", "<warm>", "exec"), {})
    traceback.extract_stack()


def run_policy(
    program_dir: str, spin: int = 0, box: Mailbox | None = None, shared: bool = False
) -> NoReturn:
    global _BOX, _SHARED
    _BOX = box  # confined (the template was told so): whatever goes wrong is the program's
    _SHARED = shared
    reader = frames.FrameReader(max_frame=1 << 30)  # host frames are trusted
    os.set_blocking(FD_OBSERVATIONS, False)
    _SPIN_POLL.register(FD_OBSERVATIONS, select.POLLIN)
    kind, context = _receive(reader, spin)
    if kind != frames.CONTEXT:
        _exit(2)
    ctx = PolicyContext(**context)
    try:
        module = _load(program_dir)
        make_policy = getattr(module, "make_policy", None)
        if not callable(make_policy):
            raise AttributeError("policy.py defines no make_policy(context) function")
        policy = make_policy(ctx)
        act = getattr(policy, "act", None)
        if not callable(act):
            raise TypeError(
                f"make_policy returned a {type(policy).__name__} without an act(observation) method"
            )
    except MemoryError as exc:
        _fail("resource_limit", "memory limit reached while starting", exc, program_dir)
    except BaseException as exc:  # SystemExit too: a policy must not end the protocol itself
        _fail("exception", "while starting (import or make_policy)", exc, program_dir)
    _send(frames.READY)
    while True:
        kind, observation = _receive(reader, spin)
        if kind != frames.OBSERVATION:
            _exit(0)
        try:
            action = act(observation)
        except MemoryError as exc:
            _fail("resource_limit", "memory limit reached in act()", exc, program_dir)
        except BaseException as exc:
            _fail("exception", "in act()", exc, program_dir)
        try:
            payload = frames.frame(frames.ACTION, action)
        except (frames.FrameError, RecursionError) as exc:
            _send(
                frames.ERROR,
                {
                    "kind": "invalid_action",
                    "message": f"act() returned a value that is not an action ({exc}); "
                    "return an int, a float, a list of numbers or a numpy value",
                    "traceback": "",
                },
            )
            _exit(0)
        _write(payload)
