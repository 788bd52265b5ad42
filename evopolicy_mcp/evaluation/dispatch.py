"""Episodes of concurrent evaluations, shared fairly between places that run them.

A place (:class:`Backend`: a worker process, a Ray actor) runs one episode at a
time. Each place has a host thread that takes the next episode from the
:class:`Dispatcher`, hands it over and waits for its outcome. Evaluations
that run at once (a run's submission, another run's validation) queue their
episodes here, and a free place takes the next one from the *share* (a run,
named in the plan) with the fewest episodes running, then the one served
least recently: a run's big validation cannot starve another run's small
submission, which gets the next free places.

Invariants:

- A place that is lost (its process died, its node went away) is a host
  fault, never a policy failure: its episode runs again on a new place, at
  most ``attempts`` times in all, then the evaluation aborts (and the host
  refunds it). An outcome is kept once per episode: only an episode that
  gave none runs again, so nothing is counted twice.
- An episode whose evaluation failed is not started; those already running
  finish before the evaluation's fault is raised, so nothing of it runs on
  afterwards.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

from evopolicy_mcp.evaluation.plan import EpisodeJob, EvaluationAborted, Outcome, Plan

__all__ = ["ATTEMPTS", "Backend", "BackendLost", "Dispatcher"]

log = logging.getLogger(__name__)

ATTEMPTS = 3  # runs of one episode whose place was lost each time, before its evaluation aborts


class BackendLost(Exception):
    """The place running an episode is gone (process died, node lost): run it elsewhere."""


class Backend(Protocol):
    """One place that runs episodes, one at a time."""

    def run(self, plan: Plan, job: EpisodeJob) -> Outcome:
        """The episode's outcome; :class:`BackendLost` if the place is gone,
        :class:`EvaluationAborted` for a host or adapter fault in the episode."""

    def close(self) -> None: ...


class _Stream:
    """The episodes of one evaluation."""

    def __init__(
        self, plan: Plan, jobs: Sequence[EpisodeJob], on_done: Callable[[Outcome], None] | None
    ) -> None:
        self.plan, self.jobs, self.on_done = plan, jobs, on_done
        self.pending: deque[int] = deque(range(len(jobs)))
        self.results: list[Outcome | None] = [None] * len(jobs)
        self.attempts = [0] * len(jobs)
        self.running = 0
        self.finished = 0
        self.error: BaseException | None = None

    def settled(self) -> bool:
        return self.running == 0 and (self.error is not None or self.finished == len(self.jobs))


class Dispatcher:
    """Places (made by ``make(slot)`` on first use, and again when lost) serving the
    episodes of every evaluation that runs at once, fairly between shares: an
    executor (the process and Ray executors are dispatchers of their own places)."""

    def __init__(
        self,
        make: Callable[[int], Backend],
        places: int,
        *,
        attempts: int = ATTEMPTS,
        name: str = "evopolicy-place",
    ) -> None:
        self._make = make
        self.places = max(1, places)
        self.attempts = attempts
        self._cond = threading.Condition()
        self._streams: list[_Stream] = []
        self._served: dict[str, int] = {}  # share -> when it was last served
        self._clock = itertools.count()
        self._closed = False
        self._backends: list[Backend | None] = [None] * self.places
        self._threads = [
            threading.Thread(target=self._serve, args=(slot,), name=f"{name}-{slot}", daemon=True)
            for slot in range(self.places)
        ]
        for thread in self._threads:
            thread.start()

    # -- evaluations ----------------------------------------------------------------

    def run(
        self,
        plan: Plan,
        jobs: Sequence[EpisodeJob],
        on_done: Callable[[Outcome], None] | None = None,
    ) -> list[Outcome]:
        stream = _Stream(plan, jobs, on_done)
        if not jobs:
            return []
        with self._cond:
            if self._closed:
                raise EvaluationAborted("the executor is closed")
            self._streams.append(stream)
            self._cond.notify_all()
            while not stream.settled():
                self._cond.wait()
            self._streams.remove(stream)
        if stream.error is not None:
            raise stream.error
        return [outcome for outcome in stream.results if outcome is not None]

    def _take(self) -> tuple[_Stream, int] | None:
        """The next episode for a free place (blocks), or None once closed."""
        with self._cond:
            while True:
                if self._closed:
                    return None
                ready = [s for s in self._streams if s.pending and s.error is None]
                if ready:
                    break
                self._cond.wait()
            running: dict[str, int] = {}
            for s in self._streams:
                running[s.plan.share] = running.get(s.plan.share, 0) + s.running
            # The share with the fewest episodes running, then the one served least
            # recently; within a share, its oldest evaluation.
            stream = min(
                ready, key=lambda s: (running[s.plan.share], self._served.get(s.plan.share, -1))
            )
            self._served[stream.plan.share] = next(self._clock)
            stream.running += 1
            return stream, stream.pending.popleft()

    def _settle(
        self, stream: _Stream, position: int, outcome: Outcome | None, error: BaseException | None
    ) -> None:
        with self._cond:
            stream.running -= 1
            if outcome is not None and stream.error is None:
                stream.results[position] = outcome
                stream.finished += 1
            elif error is not None and stream.error is None:
                stream.error = error
            self._cond.notify_all()

    # -- places ---------------------------------------------------------------------

    def _serve(self, slot: int) -> None:
        while (item := self._take()) is not None:
            stream, position = item
            job = stream.jobs[position]
            outcome: Outcome | None = None
            error: BaseException | None = None
            try:
                backend = self._backends[slot]
                if backend is None:
                    backend = self._backends[slot] = self._make(slot)
                outcome = backend.run(stream.plan, job)
            except BackendLost as exc:
                self._drop(slot)
                if self._lost(stream, position, exc):
                    continue  # queued again: this run of it gave nothing
                error = EvaluationAborted(
                    f"host fault: the place running episode {job.index} was lost "
                    f"{self.attempts} times ({exc})"
                )
            except EvaluationAborted as exc:
                error = exc
            except Exception as exc:  # a malformed message, a worker that cannot start
                log.error("place %d: %r", slot, exc)
                self._drop(slot)
                error = EvaluationAborted(f"host fault in the executor: {exc!r}")
            if outcome is not None and stream.on_done is not None and stream.error is None:
                try:
                    stream.on_done(outcome)
                except BaseException as exc:
                    outcome, error = None, exc
            self._settle(stream, position, outcome, error)
        self._drop(slot)

    def _lost(self, stream: _Stream, position: int, exc: BackendLost) -> bool:
        """Queue an episode whose place was lost again, first in its evaluation; False when
        it has had its attempts (or the executor is closing)."""
        with self._cond:
            stream.attempts[position] += 1
            again = not self._closed and stream.attempts[position] < self.attempts
            log.warning(
                "episode %d lost its place (%s); %s",
                stream.jobs[position].index,
                exc,
                "running it again" if again else "giving up",
            )
            if not again:
                return False
            stream.running -= 1
            stream.pending.appendleft(position)
            self._cond.notify_all()
            return True

    def _drop(self, slot: int) -> None:
        backend, self._backends[slot] = self._backends[slot], None
        if backend is not None:
            try:
                backend.close()
            except Exception:
                log.debug("closing place %d", slot, exc_info=True)

    def backends(self) -> list[Backend]:
        return [b for b in self._backends if b is not None]

    def close(self) -> None:
        """Stop every place; evaluations still running abort (as host faults)."""
        with self._cond:
            self._closed = True
            for stream in self._streams:
                if stream.error is None:
                    stream.error = EvaluationAborted("the executor was closed")
            self._cond.notify_all()
        for slot in range(self.places):
            self._drop(slot)  # a place in the middle of an episode sees it lost
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=30)

    def __enter__(self) -> Dispatcher:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
