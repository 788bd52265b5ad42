"""Finalize and judging: closing a run, handing its judging elsewhere or doing it here,
waiting for its end. A part of :class:`~evopolicy_mcp.host.authority.Host`.

Invariants enforced here:

- A rejected finalize leaves the run open (nothing is written before the one
  transaction that closes it).
- Validation starts only once every admitted training submission of the run has
  finished and its feedback is committed (or it was refunded): no policy code of the
  run's training split runs while or after hidden episodes run.
- Judging is resumable at any point: a run left ``finalizing`` by a dead host is claimed
  and judged again, never twice at once (the store's claims decide).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from evopolicy_mcp.host.admission import candidate_rejection, check_candidates
from evopolicy_mcp.host.judge import judge
from evopolicy_mcp.host.public import FINALIZE_MESSAGE
from evopolicy_mcp.host.views import FinalizeAck, RunStatus
from evopolicy_mcp.store.database import PENDING, Rejected

if TYPE_CHECKING:
    from evopolicy_mcp.evaluation.plan import Executor
    from evopolicy_mcp.host.workers import Workers
    from evopolicy_mcp.store.database import Store
    from evopolicy_mcp.store.records import RunRecord
    from evopolicy_mcp.tasks.model import Task

log = logging.getLogger(__name__)

_FINALIZE_ATTEMPTS = 3
POLL_SECONDS = 0.5  # waits re-read the records this often (another process may write them)


class Closing:
    """Finalize, judging and waiting for a run's end (mixed into ``Host``)."""

    store: Store
    executor: Executor | None
    hand_off: Callable[[str], None] | None
    _work: Workers | None

    @property
    def work(self) -> Workers:
        raise NotImplementedError

    def _stopping(self) -> bool:
        raise NotImplementedError

    def _run(self, run_id: str, client: str | None = None) -> RunRecord:
        raise NotImplementedError

    def _operator_run(self, run_id: str) -> RunRecord:
        raise NotImplementedError

    def _run_task(self, run: RunRecord) -> Task:
        raise NotImplementedError

    def run_status(
        self,
        run_id: str,
        *,
        offset: int = 0,
        max_chars: int | None = None,
        client: str | None = None,
    ) -> RunStatus:
        raise NotImplementedError

    def finalize(
        self, run_id: str, candidates: list[str], *, client: str | None = None
    ) -> FinalizeAck:
        """Close the run and hand over ``candidates``; rejected requests leave it open.

        Judging then runs to its end whoever stays connected: in a background
        thread of this host, or, with ``hand_off``, in a process of its own that
        outlives this one (the ``evopolicy-mcp judge`` command), which claims the
        run. Either waits for the run's pending training submissions first."""
        run = self._run(run_id, client)
        task = self._run_task(run)
        check_candidates(run, task, candidates)
        try:
            self.store.begin_finalize(run.id, list(candidates), own=self.hand_off is None)
        except Rejected as rejected:
            raise candidate_rejection(run, rejected) from None
        if self.hand_off is None:
            self._start_finalize(run.id)
        else:
            self._hand_off(run.id)
        return FinalizeAck(
            run_id=run.id, candidates=list(candidates), state="finalizing", message=FINALIZE_MESSAGE
        )

    def _hand_off(self, run_id: str) -> None:
        """Start the judging elsewhere; if that fails, claim the run and judge it here."""
        assert self.hand_off is not None
        try:
            self.hand_off(run_id)
            return
        except Exception as exc:
            log.error("judging %s elsewhere failed (%r); judging it here", run_id, exc)
        for run in self.store.claim_orphans(run_id)[1]:
            self._start_finalize(run.id)

    def _start_finalize(self, run_id: str) -> None:
        self.work.spawn(lambda: self._finalize_job(run_id), "evopolicy-finalize")

    def _pending(self, run_id: str) -> bool:
        return any(s.state in PENDING for s in self.store.list_submissions(run_id))

    def _await_training(self, run_id: str) -> bool:
        """Wait until no training submission of the run is pending, evaluating those a
        dead host left; False if this host is stopping first."""
        while self._pending(run_id):
            if self._stopping():
                return False
            for sub in self.store.claim_orphans(run_id, runs=False)[0]:
                self.work.schedule(sub, None)
            self.work.wait_until(lambda: not self._pending(run_id), 5.0, POLL_SECONDS)
        return not self._stopping()

    def _finalize_job(self, run_id: str) -> None:
        """Validation of every candidate, selection, assessment; resumable at any point."""
        for attempt in range(1, _FINALIZE_ATTEMPTS + 1):
            if self._stopping():
                return
            try:
                self._validate_and_assess(run_id)
                return
            except Exception as exc:
                if self._stopping():
                    return
                log.error("finalize of %s, attempt %d: %r", run_id, attempt, exc)
                try:
                    self.store.set_run_error(run_id, f"attempt {attempt}: {exc!r}")
                except Exception:
                    return
                time.sleep(min(2.0, 0.2 * attempt))

    def _validate_and_assess(self, run_id: str) -> None:
        run = self.store.get_run(run_id)
        if run is None:
            return
        task = self._run_task(run)
        if not self._await_training(run_id):
            return
        assert self.executor is not None
        judge(self.store, run, task, executor=self.executor)
        if self._work is not None:
            self._work.notify()

    def wait_final(self, run_id: str, timeout: float) -> RunStatus:
        """Block until validation and assessment are done (operator and demo use)."""
        run = self._operator_run(run_id)

        def settled() -> bool:
            current = self.store.get_run(run.id)
            return current is None or current.state != "finalizing"

        self.work.wait_until(settled, timeout, POLL_SECONDS)
        return self.run_status(run_id, client=run.client)

    def finish(self, run_id: str, timeout: float) -> RunStatus:
        """Finish a finalizing run whoever started it (operator use): claim what no live
        host holds (its pending submissions, its judging), then wait for the end, taking
        over again whenever the host judging it dies."""
        run = self._operator_run(run_id)
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            subs, runs = self.store.claim_orphans(run.id)
            for sub in subs:
                self.work.schedule(sub, None)
            for claimed in runs:
                self._start_finalize(claimed.id)
            left = deadline - time.monotonic()
            status = self.wait_final(run.id, min(left, 5.0))
            if status.state != "finalizing" or left <= 5.0 or self._stopping():
                return status
