"""The thread executor: an evaluation's episodes driven on one host thread.

An episode (:data:`~evopolicy_mcp.evaluation.loop.Episode`) is a generator that
yields its policy process whenever it waits for an answer; an executor resumes
it with the answer. :class:`ThreadExecutor` drives every episode of an
evaluation on one host thread (the environments' Python work needs the GIL,
and several threads only handed it to and fro): one at a time with blocking
waits (:func:`drive`), or several at once, stepping whichever has its answer
(:func:`_multiplex`). Evaluations that run at once each have their own thread;
none waits for another to finish. :mod:`~evopolicy_mcp.evaluation.processes`
spreads episodes over worker processes that each drive theirs with :func:`drive`.
"""

from __future__ import annotations

import os
import select
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from evopolicy_mcp.evaluation.loop import Episode, Episodes, Placement
from evopolicy_mcp.evaluation.plan import EpisodeJob, Outcome, Plan
from evopolicy_mcp.kernel import mailbox
from evopolicy_mcp.runner.process import PENDING, PolicyFailure, PolicyProcess, RunnerError
from evopolicy_mcp.runner.template import Runner

__all__ = [
    "SPIN_SWITCH_SECONDS",
    "SPIN_TRIES",
    "Placement",
    "ThreadExecutor",
    "default_runner",
    "default_workers",
    "drive",
]

T = TypeVar("T")
J = TypeVar("J")  # a job: what ``work`` makes an episode of


_default_runner: Runner | None = None
_default_lock = threading.Lock()


def default_runner() -> Runner:
    """A process-wide runner, started on first use."""
    global _default_runner
    with _default_lock:
        if _default_runner is None:
            _default_runner = Runner()
        return _default_runner


SPIN_TRIES = 256  # about 130 us of polling before a side goes to sleep
# A spinning worker holds the GIL; another thread that wants it (the server's, another
# worker) gets it after this long. Python's default, 5 ms, made a server request wait
# up to a whole episode behind a spinning worker.
SPIN_SWITCH_SECONDS = 0.0005
IDLE_ROUNDS = 512  # rounds over the episodes with no answer before the host sleeps
LOOK_SECONDS = 0.001  # how often a polling host also reads pipes and checks deadlines
NAP_SECONDS, MAX_NAP_SECONDS = mailbox.NAP_SECONDS, mailbox.MAX_NAP_SECONDS


def default_workers(cpus: int) -> int:
    """Episodes at once by default on ``cpus`` CPUs (see :class:`ThreadExecutor`)."""
    return 1 if cpus < 2 else max(2, cpus - 1)


def drive(episode: Episode[T]) -> T:
    """Run one episode to its end, waiting for each answer it needs.

    What goes wrong while waiting is thrown into the episode: a policy failure ends
    it as such, a runner fault (:class:`RunnerError`) aborts it as a host fault."""
    answer: Any = None
    failure: Exception | None = None
    try:
        while True:
            try:
                proc = episode.send(answer) if failure is None else episode.throw(failure)
            except StopIteration as stop:
                return stop.value
            failure = None
            try:
                answer = proc.receive()
            except (PolicyFailure, RunnerError) as exc:
                failure = exc
    finally:
        episode.close()


class ThreadExecutor:
    """Episodes at once (``workers``) on one host thread.

    The Python work of every episode (environments, frames) needs the GIL, so one
    thread does it all: more would only hand the GIL to and fro. It is pinned to the
    first CPU and each policy process to another. With one episode at a time, the
    host waits for each answer, spinning, and so does the policy process on its CPU:
    a hand-over costs microseconds. With more, the host steps whichever episode has
    its answer and never waits while one has; an episode's start (milliseconds of
    the template's and the policy process's) overlaps the others' steps. Policy
    processes that share a CPU yield between their looks. On one CPU everything
    shares it and the policy processes sleep between hand-overs. Spinning lowers the
    process's GIL switch interval to ``SPIN_SWITCH_SECONDS`` for good.

    The default is one episode per CPU but the host's, and at least two where there
    are two CPUs: their policy processes then share the second (12% more episodes a
    second than one at a time there, in paired runs), and deadlines, which are
    wall-clock, come sooner for a policy that needs its CPU to the full.
    """

    def __init__(self, workers: int | None = None, runner: Runner | None = None) -> None:
        self.cpus = sorted(os.sched_getaffinity(0))
        self.workers = max(1, workers or default_workers(len(self.cpus)))
        self.runner = runner

    def run(
        self,
        plan: Plan,
        jobs: Sequence[EpisodeJob],
        on_done: Callable[[Outcome], None] | None = None,
    ) -> list[Outcome]:
        """The plan's episodes on this executor's runner (the process-wide one by default)."""
        episodes = Episodes(plan, self.runner or default_runner())
        return self.map(lambda job, slot: episodes.run(job, self.placement(slot)), jobs, on_done)

    def close(self) -> None:
        """Nothing to stop: the runner belongs to whoever gave it."""

    def placement(self, slot: int) -> Placement:
        cpus = self.cpus
        if len(cpus) < 2:
            cpu = cpus[0] if cpus else None
            return Placement(cpu, cpu, 0)
        others = cpus[1:]
        at = slot % len(others)
        shared = at + len(others) < self.workers  # a later slot's policy process comes here
        # Spinning on a shared CPU needs the mailbox: looking at a pipe is a system call.
        spin = SPIN_TRIES if not shared or mailbox.supported() else 0
        return Placement(cpus[0], others[at], spin, shared)

    def map(
        self,
        work: Callable[[J, int], Episode[T]],
        jobs: Sequence[J],
        on_done: Callable[[T], None] | None = None,
    ) -> list[T]:
        results: list[Any] = [None] * len(jobs)
        errors: list[BaseException] = []

        def done(position: int, result: T) -> None:
            results[position] = result
            if on_done is not None:
                on_done(result)

        def host() -> None:
            place = self.placement(0)
            if place.host_cpu is not None:
                try:
                    os.sched_setaffinity(0, {place.host_cpu})  # this thread only
                except OSError:
                    pass
            try:
                if self.workers == 1:
                    for position, job in enumerate(jobs):
                        done(position, drive(work(job, 0)))
                else:
                    _multiplex(work, jobs, min(self.workers, len(jobs)), done)
            except BaseException as exc:
                errors.append(exc)

        if not jobs:
            return results
        if self.placement(0).spin and sys.getswitchinterval() > SPIN_SWITCH_SECONDS:
            sys.setswitchinterval(SPIN_SWITCH_SECONDS)  # for the process: never raised back
        thread = threading.Thread(target=host, name="evopolicy-episodes", daemon=True)
        thread.start()
        thread.join()
        if errors:
            raise errors[0]
        return results


class _Live:
    """An episode in progress under :func:`_multiplex`."""

    __slots__ = ("episode", "position", "proc", "slot")

    def __init__(self, episode: Episode[Any], position: int, slot: int) -> None:
        self.episode, self.position, self.slot = episode, position, slot
        self.proc: PolicyProcess | None = None


def _multiplex(
    work: Callable[[J, int], Episode[T]],
    jobs: Sequence[J],
    width: int,
    done: Callable[[int, T], None],
) -> None:
    """Drive up to ``width`` episodes at once on this thread: whichever has its answer
    is resumed. With none for a while it reads the pipes (deaths, deadlines, output),
    and then sleeps until a policy process writes or a deadline comes."""
    live: list[_Live] = []
    queued = iter(enumerate(jobs))

    def start(slot: int) -> None:
        """The next job, if any, takes ``slot``: run to its first wait."""
        for position, job in queued:
            entry = _Live(work(job, slot), position, slot)
            live.append(entry)
            resume(entry)
            return

    def resume(entry: _Live, answer: Any = None, failure: Exception | None = None) -> None:
        try:
            episode = entry.episode
            entry.proc = episode.send(answer) if failure is None else episode.throw(failure)
        except StopIteration as stop:
            live.remove(entry)
            done(entry.position, stop.value)
            start(entry.slot)

    try:
        for slot in range(width):
            start(slot)
        idle = 0
        looked = time.monotonic()
        nap = NAP_SECONDS
        while live:
            look = idle >= IDLE_ROUNDS or time.monotonic() - looked >= LOOK_SECONDS
            if look:
                looked = time.monotonic()
            progressed = False
            for entry in list(live):
                proc = entry.proc
                assert proc is not None
                started = time.monotonic()
                try:
                    answer = proc.poll(look)
                except (PolicyFailure, RunnerError) as exc:
                    resume(entry, failure=exc)
                else:
                    if answer is PENDING:
                        continue
                    resume(entry, answer)
                progressed = True
                # The others waited on this thread meanwhile (stepping this episode, or
                # a slow adapter, or a process that would not die): it is not theirs to
                # pay. Their deadlines move by as much, as if each ran alone; an episode
                # that started meanwhile (in this one's slot) did not wait.
                busy = time.monotonic() - started
                for other in live:
                    waited = other.proc
                    if other is not entry and waited is not None and waited.started < started:
                        waited.excuse(busy)
            if progressed:
                idle, nap = 0, NAP_SECONDS
                continue
            idle += 1
            if idle > IDLE_ROUNDS:
                nap = _sleep([e.proc for e in live if e.proc is not None], nap)
                idle = IDLE_ROUNDS  # looks once more, then sleeps again if nothing came
    finally:
        for entry in live:  # a fault stopped the evaluation: its episodes end now
            try:
                entry.episode.close()
            except Exception:
                pass  # the adapter failing again on the way out: the first fault is raised


def _sleep(procs: list[PolicyProcess], nap: float) -> float:
    """Sleep until a policy process writes to its pipe (having said it would sleep, its
    answer comes with a WAKE), a deadline, or the end of ``nap``; returns the next nap."""
    dozing = []
    try:
        for proc in procs:
            if not proc.doze():
                return nap  # an answer came meanwhile
            dozing.append(proc)
        poller = select.poll()
        for proc in procs:
            for fd in proc.wake_fds():
                poller.register(fd, select.POLLIN)
        seconds = min([nap] + [proc.seconds_left() for proc in procs])
        poller.poll(max(0, int(seconds * 1000 + 0.999)))
        return min(2 * nap, MAX_NAP_SECONDS)
    finally:
        for proc in dozing:
            proc.undoze()
