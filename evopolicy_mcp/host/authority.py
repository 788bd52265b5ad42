"""The host: the authority over runs, pools, budgets, admission, finalize, validation,
assessment and seeds, and the line between public and private. No MCP in here.

Invariants enforced here (the budget arithmetic itself is in the store):

- A rejected call and a program that fails to capture cost nothing: every
  check that can fail runs before the one transaction that charges.
- Host faults never become policy penalties: an evaluation the host could not
  finish (:class:`~evopolicy_mcp.evaluation.episodes.EvaluationAborted`, or any other
  host error) refunds the submission.
- Nothing private crosses into a view or a :class:`HostError` message: no
  seed, no secret, no host path, no validation or assessment result. The
  agent addresses episodes only by pool index.
- Validation gives every candidate the same hidden episodes; assessment uses
  its own seed domain and never changes the selection.
- A restart resumes: a submission that was pending is evaluated again (it was
  charged once and stays charged once); an interrupted finalize completes.
- One client, its runs: a run started by a named client (an MCP session over
  HTTP) answers that client only; to any other it does not exist. Runs started
  unnamed (stdio, the operator, a bound server's run) answer every caller.
  A server shared by several agents binds each client to its run and its
  program folder (:mod:`evopolicy_mcp.host.bindings`): any other run does not
  exist for it, and a client without a binding reaches none.
- Finalize and judging: :mod:`evopolicy_mcp.host.closing`; what an agent may list
  and read of tasks: :mod:`evopolicy_mcp.host.catalog`.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from evopolicy_mcp.adapters.protocol import EnvSpec
from evopolicy_mcp.evaluation import seeds
from evopolicy_mcp.evaluation.executor import ThreadExecutor
from evopolicy_mcp.evaluation.executors import make_executor
from evopolicy_mcp.evaluation.plan import Executor
from evopolicy_mcp.host.admission import (
    capture_program,
    check_budget,
    check_open,
    rejection,
)
from evopolicy_mcp.host.bindings import RUN_NAME, Binding, Bindings, check_binding
from evopolicy_mcp.host.catalog import Catalog
from evopolicy_mcp.host.closing import POLL_SECONDS, Closing
from evopolicy_mcp.host.errors import ERROR_CODES, HostError
from evopolicy_mcp.host.feedback_pages import submission_view
from evopolicy_mcp.host.program_root import ProgramRoot
from evopolicy_mcp.host.public import (
    evicted_note,
    remaining,
    run_info,
    run_state,
    run_status,
    submission_status,
)
from evopolicy_mcp.host.reports import build_report, build_rows, reproducibility
from evopolicy_mcp.host.selectors import SelectorError, parse_selector
from evopolicy_mcp.host.views import (
    Remaining,
    RunInfo,
    RunReport,
    RunRow,
    RunStatus,
    SubmissionView,
)
from evopolicy_mcp.host.workers import Workers
from evopolicy_mcp.kernel.sandbox import Isolation
from evopolicy_mcp.runner.template import Runner
from evopolicy_mcp.store import eviction
from evopolicy_mcp.store.database import PENDING, Rejected, Store
from evopolicy_mcp.store.records import RunRecord, SubmissionRecord
from evopolicy_mcp.tasks.model import Task, load_catalog, task_dirs

__all__ = ["ERROR_CODES", "Host", "HostError", "RUN_NAME"]

log = logging.getLogger(__name__)


class Host(Catalog, Closing):
    """The authority over the runs in one data directory. Thread-safe.

    ::

        host = Host(data_dir, tasks_dirs=["my_tasks"])
        run = host.start_run("cartpole")
        sub = host.submit(run.run_id, "0:4", files={"policy.py": source})
        view = host.wait(run.run_id, sub, timeout=45)   # SubmissionView
        host.finalize(run.run_id, [sub])                # FinalizeAck; judging runs in background
        host.close()
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        tasks_dirs: Sequence[str | Path] = (),
        runner: Runner | None = None,
        workers: int | None = None,
        executor: str | Executor = "thread",
        ray_address: str | None = None,
        seed: int | None = None,
        bind: tuple[str, str] | None = None,
        bound_clients: bool = False,
        max_runs: int | None = None,
        concurrency: int | None = None,
        close_timeout: float = 10.0,
        isolation: Isolation | None = None,
        allow_program_dir: bool = True,
        program_root: Path | None = None,
        resume: bool | str = True,
        hand_off: Callable[[str], None] | None = None,
        trace_all: bool = False,
        trace_steps: int | None = None,
        finish: str | None = None,
        storage_mb: float | None = None,
    ) -> None:
        catalog = load_catalog(tasks_dirs)
        self.tasks: dict[str, Task] = catalog.tasks
        self._families = catalog.families
        if runner is None:
            # Policy processes must not read the records or the operator's task files.
            hidden = (str(data_dir), *(str(d) for d in task_dirs(tasks_dirs, builtin=False)))
            base = isolation or Isolation()
            runner = Runner(isolation=replace(base, hidden=(*base.hidden, *hidden)))
            self._own_runner: Runner | None = runner
        else:
            self._own_runner = None
        self.runner = runner
        self._own_executor = isinstance(executor, str)
        self.executor: Executor | None = None
        if isinstance(executor, str):
            # Worker processes and actors make their runners with the same isolation.
            executor = make_executor(
                executor, workers=workers, runner=runner, ray_address=ray_address
            )
        self.executor = executor
        if concurrency is None:
            # The thread executor gives each evaluation its own host thread: two at once.
            # The others queue every evaluation's episodes, fairly between runs.
            concurrency = 2 if isinstance(executor, ThreadExecutor) else 8
        # A remote client must not make the server read (and describe) its own folders.
        self.allow_program_dir = allow_program_dir
        self.workers = workers
        self.seed = seed
        self.bind = bind
        self.max_runs = max_runs
        self.close_timeout = close_timeout
        # Judging a finalized run elsewhere (a process that outlives this one), or here.
        self.hand_off = hand_off
        # Dataset-building runs: every training episode traced (the runs this host creates).
        self.trace_all = trace_all
        self.trace_steps = trace_steps
        # The finish rule of the runs this host creates, over their tasks' (None: the task's).
        self.finish_rule = finish
        # The cap of each new run's bulky feedback, over its task's (None: the task's).
        self.storage_mb = storage_mb
        self.store = Store(Path(data_dir))
        self.data_dir = self.store.data_dir
        # Where program_dir may point (None: anywhere the caller can name).
        try:
            self.program_root = ProgramRoot(program_root, self.data_dir)
        except BaseException:
            self.store.close()
            raise
        # A shared server: each client's run and program folder (see host.bindings).
        self.bindings = Bindings(self.tasks, self.store) if bound_clients else None
        self._specs: dict[str, EnvSpec] = {}
        self._run_tasks: dict[str, Task] = {}
        self._start_lock = threading.Lock()
        self._runs_started = 0  # counted from the records below, so a restart cannot reset it
        self._closed = False
        self._work: Workers | None = None
        try:
            self._check_bind()
            self.store.acquire_instance()
            self._work = Workers(
                self.store, self._run_task, executor=executor, concurrency=concurrency
            )
            self._runs_started = len(self.store.list_runs())
            # Work of dead hosts: all of it, none (a host made for one step), or one run's.
            subs: list[SubmissionRecord] = []
            runs: list[RunRecord] = []
            if resume is not False:
                subs, runs = self.store.claim_orphans(
                    None if resume is True else resume, runs=hand_off is None
                )
        except BaseException:
            self.close()
            raise
        for sub in subs:
            self._work.schedule(sub, None)
        for run in runs:
            self._start_finalize(run.id)
        if hand_off is not None and resume is not False:
            for record in self.store.list_runs():
                unheld = record.state == "finalizing" and not self.store.instance_alive(
                    record.owner
                )
                if unheld and (resume is True or record.id == resume):
                    self._hand_off(record.id)

    def _stopping(self) -> bool:
        return self._closed or self._work is None or self._work.closing

    @property
    def work(self) -> Workers:
        if self._work is None or self._closed:
            raise RuntimeError("the host is closed")
        return self._work

    # ------------------------------------------------------------ tasks

    def _binding(self, client: str | None) -> Binding | None:
        """The run (its task, its program folder) ``client`` is bound to, if any; on a
        shared server, ``unknown_run`` for a client with none."""
        if self.bindings is not None:
            return self.bindings.get(client)
        return None if self.bind is None else Binding(*self.bind)

    # ------------------------------------------------------------ runs

    def start_run(self, task_id: str, *, client: str | None = None) -> RunInfo:
        bound = self._binding(client)
        if bound is not None and task_id != bound.task:
            raise HostError(
                "bound_run",
                f"this server is bound to run {bound.run!r} of task {bound.task!r}; "
                f"call start_run({bound.task!r}) to get it",
            )
        task = self._task(task_id, client)
        self._check_available(task)
        with self._start_lock:
            if bound is not None:
                run = self._bound_run(task, bound.run)
                # How a launcher tells an agent that reached its run from one that never did.
                self.store.add_event(run.id, "attached", {})
                return self._run_info(run)
            if self.max_runs is not None and self._runs_started >= self.max_runs:
                raise HostError(
                    "run_limit",
                    f"this server starts at most {self.max_runs} run(s) and has started them; "
                    "continue with the run_id you already have",
                )
            while True:
                try:
                    run = self._create_run(task, f"run-{secrets.token_hex(4)}", client)
                    break
                except Rejected:  # an id collision: draw again
                    continue
            self._runs_started += 1
        return self._run_info(run)

    def prepare_run(self) -> RunInfo:
        """The bound run, created now if it does not exist (operator use, before an agent
        is launched against it)."""
        if self.bind is None:
            raise RuntimeError("prepare_run needs a host bound to a run")
        with self._start_lock:
            return self._run_info(self._bound_run(self._task(self.bind[0]), self.bind[1]))

    def _bound_run(self, task: Task, run_id: str) -> RunRecord:
        run = self.store.get_run(run_id)
        if run is not None:
            return run
        if self.bindings is not None:  # a shared server's runs are made by their launcher
            raise HostError("unknown_run", f"run {run_id!r} is not ready yet; try again shortly")
        return self._create_run(task, run_id)

    def _check_bind(self) -> None:
        if self.bind is not None:
            check_binding(self.tasks, self.store, *self.bind)

    def _create_run(self, task: Task, run_id: str, client: str | None = None) -> RunRecord:
        repro = reproducibility(task, self.seed)
        if self.trace_all or self.trace_steps is not None:
            task = task.with_tracing(every_episode=self.trace_all, steps=self.trace_steps)
            repro["tracing"] = {"episodes": task.trace_episodes, "steps": task.trace_steps}
        if self.finish_rule is not None:
            task = task.model_copy(
                update={"budget": task.budget.model_copy(update={"finish": self.finish_rule})}
            )
        repro["finish"] = task.budget.finish
        if self.storage_mb is not None:
            task = task.model_copy(update={"storage_mb": self.storage_mb})
        repro["storage_mb"] = task.storage_mb
        secret = (
            seeds.new_secret() if self.seed is None else seeds.secret_from_seed(self.seed, "run")
        )
        b = task.budget
        deadline = None if b.wall_seconds is None else time.time() + b.wall_seconds
        return self.store.create_run(
            run_id,
            task_id=task.id,
            task_digest=task.digest,
            task_json=task.model_dump_json(),
            secret=secret,
            budget={
                "episodes": b.episodes,
                "submissions": b.submissions,
                "per_submission": b.per_submission,
                "pool": b.pool,
                "finish": b.finish,
            },
            deadline=deadline,
            reproducibility=repro,
            client=client,
        )

    def _run(self, run_id: str, client: str | None = None) -> RunRecord:
        bound = self._binding(client)
        if bound is not None and run_id != bound.run:
            raise HostError(
                "unknown_run", f"this server serves only run {bound.run!r}; use that run_id"
            )
        run = self.store.get_run(run_id) if isinstance(run_id, str) else None
        if run is not None and run.client is not None and run.client != client:
            run = None  # another client's: the same answer as no run at all
        if run is None:
            raise HostError("unknown_run", f"no run {run_id!r}; start one with start_run(task_id)")
        return run

    def _operator_run(self, run_id: str) -> RunRecord:
        """A run whoever started it (the operator sees every run)."""
        run = self.store.get_run(run_id)
        if run is None:
            raise HostError("unknown_run", f"no run {run_id!r}")
        return run

    def _run_task(self, run: RunRecord) -> Task:
        """The task as it was when the run started (a later edit of its file changes nothing)."""
        task = self._run_tasks.get(run.id)
        if task is None:
            task = Task.model_validate_json(run.task_json)
            current = self.tasks.get(run.task_id)
            task = task.model_copy(
                update={"digest": run.task_digest, "source": current.source if current else None}
            )
            self._run_tasks[run.id] = task
        return task

    def _remaining(self, run: RunRecord) -> Remaining:
        usage = self.store.usage(run.id)
        return remaining(self._run_task(run), usage.episodes, usage.submissions, run.deadline)

    def _run_info(self, run: RunRecord) -> RunInfo:
        task = self._run_task(run)
        return run_info(run.id, task, run_state(run.state), self._remaining(run))

    def run_status(
        self,
        run_id: str,
        *,
        offset: int = 0,
        max_chars: int | None = None,
        client: str | None = None,
    ) -> RunStatus:
        """Budget and state; the submissions from ``offset`` (as many as fit ``max_chars``)."""
        run = self._run(run_id, client)
        subs = self.store.list_submissions(run.id)
        used = sum(s.charged for s in subs if s.state != "refunded")
        task = self._run_task(run)
        return run_status(
            run.id,
            task,
            run_state(run.state),
            self._remaining(run),
            used,
            subs,
            offset=offset,
            max_chars=max_chars,
        )

    # ------------------------------------------------------------ admission

    def submit(
        self,
        run_id: str,
        episodes: str,
        *,
        files: dict[str, str] | None = None,
        program_dir: str | None = None,
        on_progress: Callable[[int, int], None] | None = None,
        client: str | None = None,
    ) -> str:
        """Admit a submission (or raise :class:`HostError`, charging nothing) and start
        evaluating it in the background. Returns the submission id."""
        run = self._run(run_id, client)
        task = self._run_task(run)
        check_open(run, task)
        try:
            indices = parse_selector(episodes, task.budget.pool)
        except SelectorError as exc:
            raise HostError(exc.code, exc.message) from None
        # The reservation below decides; this early look only avoids a useless capture.
        usage = self.store.usage(run.id)
        check_budget(task, usage.episodes, usage.submissions, len(indices))
        if program_dir is not None and not self.allow_program_dir:
            raise HostError(
                "program_invalid",
                "this server takes programs inline only: send files={'policy.py': '...'} "
                "(program_dir is off for clients on other machines)",
            )
        bound = self._binding(client)
        root = bound.root if bound is not None and bound.root is not None else self.program_root
        program = capture_program(
            files, program_dir, programs_dir=self.store.programs_dir, root=root
        )
        try:
            record = self.store.reserve(
                run.id,
                selector=episodes.strip(),
                indices=indices,
                program={
                    "digest": program.digest,
                    "files": list(program.files),
                    "size": program.size,
                },
            )
        except Rejected as rejected:
            raise rejection(rejected, task) from None
        self.work.schedule(record, on_progress)
        return record.id

    # ------------------------------------------------------------ feedback

    def _submission(self, run: RunRecord, submission_id: str) -> SubmissionRecord:
        sub = (
            self.store.get_submission(run.id, submission_id)
            if isinstance(submission_id, str)
            else None
        )
        if sub is None:
            raise HostError(
                "unknown_submission",
                f"run {run.id} has no submission {submission_id!r}; run_status lists them",
            )
        return sub

    def artifact(
        self, run_id: str, submission_id: str, episode: int, name: str, *, client: str | None = None
    ) -> bytes:
        """A file the adapter saved for a traced training episode (a replay, a trajectory).

        Only training submissions have any: the host's own validation and
        assessment never save artifacts."""
        sub = self._submission(self._run(run_id, client), submission_id)
        missing = HostError(
            "unknown_artifact",
            f"submission {submission_id} has no artifact {name!r} for episode {episode}; "
            "get_feedback(episode=N) lists an episode's artifacts in traces[].artifacts",
        )
        if episode not in sub.indices:
            raise missing
        try:
            data = self.store.read_artifact(run_id, submission_id, f"episode-{episode}/{name}")
        except ValueError:
            raise missing from None
        if data is None:
            gone = eviction.evicted(self.store, run_id, submission_id)
            if gone is not None and f"episode-{episode}/{name}" in gone.files:
                raise HostError(
                    "unknown_artifact",
                    f"{name!r} of submission {submission_id} was evicted: "
                    + evicted_note(gone, self._run_task(self._run(run_id, client))),
                )
            raise missing
        return data

    def wait(
        self,
        run_id: str,
        submission_id: str,
        timeout: float,
        *,
        max_chars: int | None = None,
        client: str | None = None,
    ) -> SubmissionView:
        """Feedback once the submission is settled, or its progress after ``timeout`` s."""
        run = self._run(run_id, client)
        self._submission(run, submission_id)

        def settled() -> bool:
            sub = self.store.get_submission(run.id, submission_id)
            return sub is None or sub.state not in PENDING

        self.work.wait_until(settled, timeout, POLL_SECONDS)
        return self.feedback(run_id, submission_id, max_chars=max_chars, client=client)

    def feedback(
        self,
        run_id: str,
        submission_id: str,
        *,
        episode: int | None = None,
        offset: int = 0,
        limit: int = 50,
        max_chars: int | None = None,
        client: str | None = None,
    ) -> SubmissionView:
        """A page of a submission's feedback (see :func:`~evopolicy_mcp.host.feedback_pages.submission_view`)."""
        run = self._run(run_id, client)
        sub = self._submission(run, submission_id)
        task = self._run_task(run)
        if episode is not None and episode not in sub.indices:
            raise HostError(
                "bad_episode",
                f"submission {sub.id} did not evaluate pool index {episode}; its episodes "
                f"are {sub.selector!r}",
            )
        status = submission_status(sub.state)
        key = (run.id, sub.id)
        fb = self.work.feedback(key) if status == "complete" else None
        partial = self.work.partial(key) if status == "running" else []
        view = submission_view(
            run_id=run.id,
            submission_id=sub.id,
            status=status,
            selector=sub.selector,
            indices=sub.indices,
            task=task,
            program_digest=sub.program_digest,
            remaining=self._remaining(run),
            feedback=fb,
            partial=partial,
            message=sub.message if status == "failed" else None,
            episode=episode,
            offset=offset,
            limit=limit,
            redact=self._redact,
            max_chars=max_chars,
        )
        gone = eviction.evicted(self.store, run.id, sub.id)
        if gone is None:
            return view
        return view.model_copy(update={"evicted": evicted_note(gone, task)})

    def _redact(self, text: str | None) -> str | None:
        """Hide the records' location in what a policy printed (it can see its own path)."""
        return text.replace(str(self.data_dir), "<records>") if text else text

    # ------------------------------------------------------------ operator

    def runs(self) -> list[RunRow]:
        return build_rows(self.store)

    def report(self, run_id: str) -> RunReport:
        report = build_report(self.store, run_id)
        if report is None:
            raise HostError("unknown_run", f"no run {run_id!r}")
        return report

    def close(self) -> None:
        """Stop background work. Unfinished work stays pending and resumes at the next start."""
        if self._closed:
            return
        if self._work is not None:
            self._work.close(self.close_timeout)
        self._closed = True
        self.program_root.close()
        if self.bindings is not None:
            self.bindings.close()
        self.store.close()
        if self._own_executor and self.executor is not None:
            self.executor.close()
        if self._own_runner is not None:
            self._own_runner.close()

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
