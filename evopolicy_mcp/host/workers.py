"""Background work of a host: evaluating admitted submissions, and finalize jobs.

Evaluations run on a few daemon threads fed by a queue (a daemon thread never
keeps the process alive on exit; whatever it had not committed stays pending
in the records and resumes at the next start). The queue is fair between runs:
a free thread takes a submission of the run with the fewest evaluating, then
of the run served least recently, so one run's many submissions do not hold
up another's. Every evaluation goes to the host's executor, which shares its
places between runs as well. Progress lives in memory only, under one
condition variable that waiters sleep on; results are committed to the store
before anyone is told.

Invariant: host faults never become policy penalties. An evaluation the host
could not finish (:class:`~evopolicy_mcp.evaluation.episodes.EvaluationAborted`, a
damaged snapshot, any host error) refunds the submission, unless the host is
shutting down: then the submission stays pending and is evaluated again later.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from evopolicy_mcp.evaluation import episodes as evaluation
from evopolicy_mcp.evaluation import snapshot
from evopolicy_mcp.evaluation.episodes import EvaluationAborted
from evopolicy_mcp.evaluation.feedback import EpisodeSummary, Feedback
from evopolicy_mcp.evaluation.plan import Executor
from evopolicy_mcp.store import eviction
from evopolicy_mcp.store.database import PENDING, Store
from evopolicy_mcp.store.records import RunRecord, SubmissionRecord
from evopolicy_mcp.tasks.model import Task

__all__ = ["REFUND_MESSAGE", "Workers"]

log = logging.getLogger(__name__)

REFUND_MESSAGE = (
    "the host could not evaluate this submission (a host or environment fault, not your "
    "program); it was not charged: its episodes and the submission are refunded. Submit it "
    "again."
)

Key = tuple[str, str]  # (run id, submission id)


@dataclass
class _Live:
    total: int
    on_progress: Callable[[int, int], None] | None = None
    finished: dict[int, EpisodeSummary] = field(default_factory=dict)


class FairQueue:
    """Submissions waiting for an evaluation thread, taken fairly between runs."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._waiting: dict[str, deque[Key]] = {}
        self._running: dict[str, int] = {}
        self._served: dict[str, int] = {}
        self._clock = itertools.count()
        self._closed = False

    def put(self, key: Key) -> None:
        with self._cond:
            self._waiting.setdefault(key[0], deque()).append(key)
            self._cond.notify()

    def get(self) -> Key | None:
        """The next submission (the run with the fewest evaluating, then the one served
        least recently), blocking; None once closed."""
        with self._cond:
            while not self._closed and not self._waiting:
                self._cond.wait()
            if self._closed:
                return None
            run = min(
                self._waiting,
                key=lambda r: (self._running.get(r, 0), self._served.get(r, -1)),
            )
            waiting = self._waiting[run]
            key = waiting.popleft()
            if not waiting:
                del self._waiting[run]
            self._running[run] = self._running.get(run, 0) + 1
            self._served[run] = next(self._clock)
            return key

    def done(self, key: Key) -> None:
        with self._cond:
            self._running[key[0]] -= 1

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class Workers:
    def __init__(
        self,
        store: Store,
        task_of: Callable[[RunRecord], Task],
        *,
        executor: Executor,
        concurrency: int,
    ) -> None:
        self.store = store
        self.task_of = task_of
        self.executor = executor
        self.cond = threading.Condition()
        self.closing = False
        self._live: dict[Key, _Live] = {}
        self._feedback: dict[Key, Feedback] = {}
        self._queue = FairQueue()
        self._evicting = threading.Lock()  # one eviction at a time: each reads what the last left
        self._threads: list[threading.Thread] = []
        for _ in range(max(1, concurrency)):
            self.spawn(self._loop, "evopolicy-submissions")

    def spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def schedule(
        self, sub: SubmissionRecord, on_progress: Callable[[int, int], None] | None
    ) -> None:
        with self.cond:
            self._live[(sub.run_id, sub.id)] = _Live(len(sub.indices), on_progress)
        self._queue.put((sub.run_id, sub.id))

    def partial(self, key: Key) -> list[EpisodeSummary]:
        """Episodes of a pending submission finished so far (in memory only)."""
        with self.cond:
            live = self._live.get(key)
            return list(live.finished.values()) if live else []

    def feedback(self, key: Key) -> Feedback | None:
        """The committed feedback of a complete submission (parsed once, then cached)."""
        with self.cond:
            cached = self._feedback.get(key)
        if cached is not None:
            return cached
        text = self.store.read_feedback(*key)
        if text is None:
            return None
        fb = Feedback.model_validate_json(text)
        with self.cond:
            self._feedback[key] = fb
        return fb

    def wait_until(self, settled: Callable[[], bool], timeout: float, poll: float) -> None:
        """Sleep until ``settled()`` or ``timeout``; re-checks at least every ``poll`` s,
        since another process may be the one writing the records."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self.cond:
            while not settled() and (left := deadline - time.monotonic()) > 0:
                self.cond.wait(min(left, poll))

    def notify(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def _loop(self) -> None:
        while not self.closing:
            key = self._queue.get()
            if key is None or self.closing:
                return
            try:
                self._evaluate(*key)
            except Exception:
                log.log(
                    logging.DEBUG if self.closing else logging.ERROR,
                    "evaluating submission %s/%s",
                    *key,
                    exc_info=True,
                )
            finally:
                self._queue.done(key)
                with self.cond:
                    self._live.pop(key, None)
                    self.cond.notify_all()

    def _on_episode(self, key: Key, summary: EpisodeSummary) -> None:
        with self.cond:
            live = self._live.get(key)
            if live is None:
                return
            live.finished[summary.index] = summary
            done, total, callback = len(live.finished), live.total, live.on_progress
            self.cond.notify_all()
        if callback is not None:
            try:
                callback(done, total)
            except Exception:  # a progress listener must never disturb an evaluation
                log.debug("progress callback failed", exc_info=True)

    def _evaluate(self, run_id: str, sub_id: str) -> None:
        sub = self.store.get_submission(run_id, sub_id)
        run = self.store.get_run(run_id)
        if sub is None or run is None or sub.state not in PENDING:
            return
        task = self.task_of(run)
        self.store.mark_evaluating(run_id, sub_id)
        jobs = evaluation.jobs_for(task, "train", sub.indices, run.secret)
        try:
            program = snapshot.open_program(self.store.programs_dir, sub.program_digest)
            fb = evaluation.evaluate(
                program,
                task,
                jobs,
                executor=self.executor,
                share=run_id,
                on_episode=lambda s: self._on_episode((run_id, sub_id), s),
                artifacts=lambda index, name, data: self.store.write_artifact(
                    run_id, sub_id, f"episode-{index}/{name}", data
                ),
            )
        except Exception as exc:
            if self.closing:
                return  # stays pending: the next start evaluates it again
            log.error("submission %s/%s not evaluated: %r", run_id, sub_id, exc)
            kind = "evaluation aborted" if isinstance(exc, EvaluationAborted) else "host error"
            self.store.refund_submission(
                run_id, sub_id, message=REFUND_MESSAGE, detail=f"{kind}: {exc!r}"
            )
            return
        try:
            committed = self.store.complete_submission(
                run_id,
                sub_id,
                score=fb.score,
                policy_failures=fb.policy_failures,
                failures=dict(fb.failures),
                feedback_json=fb.model_dump_json(),
            )
        except Exception as exc:  # a full disk, say: refund rather than leave it "running"
            log.error("feedback of %s/%s not committed: %r", run_id, sub_id, exc)
            try:
                self.store.refund_submission(
                    run_id, sub_id, message=REFUND_MESSAGE, detail=f"host error: {exc!r}"
                )
            except Exception:
                log.exception("refund of %s/%s failed; the next start re-runs it", run_id, sub_id)
            return
        if committed:
            with self.cond:
                self._feedback[(run_id, sub_id)] = fb
            self._evict(run_id, task)

    def _evict(self, run_id: str, task: Task) -> None:
        """Keep the run's bulky feedback within its cap (see :mod:`~evopolicy_mcp.store.eviction`)."""
        try:
            with self._evicting:
                gone = eviction.evict(self.store, run_id, int(task.storage_mb * 2**20))
        except Exception:  # a full disk, say: the feedback is committed; try next time
            log.exception("eviction in run %s failed", run_id)
            return
        with self.cond:
            for item in gone:
                self._feedback.pop((run_id, item.submission_id), None)

    def close(self, timeout: float) -> None:
        """Stop taking work and give running work up to ``timeout`` s to commit."""
        self.closing = True
        self._queue.close()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
        self.notify()
