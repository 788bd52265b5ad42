"""What an agent may see: building the agent views from tasks and records.

Every function here takes public inputs only (a task, submission records and
their public feedback, budget counts) and returns a :mod:`evopolicy_mcp.host.views`
model. Nothing here can reach a run secret, a seed or a hidden result: the
host passes none of them in (a run record, which holds the secret, never
comes here).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from evopolicy_mcp.adapters.protocol import EnvSpec
from evopolicy_mcp.evaluation.feedback import EpisodeSummary, Feedback, Trace
from evopolicy_mcp.host.guide import ABI_GUIDE
from evopolicy_mcp.host.views import (
    BudgetView,
    EpisodeView,
    LimitsView,
    Remaining,
    RunInfo,
    RunState,
    RunStatus,
    ScoreView,
    SubmissionBrief,
    SubmissionStatus,
    SubmissionView,
    TaskInfo,
    TaskSpec,
)
from evopolicy_mcp.store.records import SubmissionRecord
from evopolicy_mcp.tasks.model import Task

__all__ = [
    "BASELINE_MAX_BYTES",
    "FINALIZE_MESSAGE",
    "MAX_PAGE",
    "baseline_files",
    "budget_view",
    "episode_view",
    "remaining",
    "rules",
    "run_info",
    "run_state",
    "run_status",
    "submission_status",
    "submission_view",
    "task_info",
    "task_spec",
]

BASELINE_MAX_BYTES = 256 * 1024
MAX_PAGE = 200
FINALIZE_MESSAGE = (
    "authority closed; the host now selects among your candidates on hidden episodes. "
    "No scores are returned."
)
_SKIPPED = {"__pycache__", ".git"}


def budget_view(task: Task) -> BudgetView:
    b = task.budget
    return BudgetView(
        episodes=b.episodes,
        submissions=b.submissions,
        per_submission=b.per_submission,
        pool=b.pool,
        wall_seconds=b.wall_seconds,
        validation_candidates=task.validation.candidates,
    )


def task_info(task: Task) -> TaskInfo:
    return TaskInfo(id=task.id, title=task.title, summary=task.summary, budget=budget_view(task))


def rules(task: Task) -> list[str]:
    """The run's rules as plain sentences, with this task's numbers."""
    b = task.budget
    out = [
        f"Each run has a training pool of {b.pool} hidden episodes, addressed only by index "
        f"0..{b.pool - 1}; you never see their seeds.",
        "submit_policy evaluates your program on the indices its selector names: "
        "comma-separated indices and half-open ranges, strictly increasing "
        "('0:2,4:8' = 0,1,4,5,6,7).",
        f"Budget: {b.episodes} episodes in total, at most {b.submissions} submissions and at "
        f"most {b.per_submission} episodes per submission. Every selected index is charged, "
        "whatever the program does.",
        "Reusing an index replays the same hidden episode, so programs compared on the same "
        "indices differ only by the program; a reused index is charged again.",
        "A rejected call (bad selector, over budget, run closed...) and a program that fails "
        "to capture cost nothing.",
        f"An episode that ends in a policy failure (exception, timeout, invalid action, "
        f"protocol error, resource limit, crash) counts {task.score.failure_value:g} for "
        f"the score metric '{task.score.metric}'.",
        "If the host itself fails to evaluate a submission, the submission is marked failed "
        "and nothing is charged for it.",
        f"finalize(run_id, candidates) takes 1 to {task.validation.candidates} of your "
        "submission ids, best first, and closes the run: no more submissions.",
        f"After finalize the host evaluates every candidate on the same "
        f"{task.validation.episodes} hidden validation episodes and selects the best score "
        f"({task.score.direction}), then fewer policy failures, then your order; the selected "
        f"program is then measured on {task.assessment.episodes} held-out episodes. Those "
        "scores are never shown to you.",
    ]
    if b.wall_seconds is not None:
        out.insert(
            3,
            f"Wall time: submissions are accepted for {b.wall_seconds:g} s after start_run; "
            "finalize is accepted after that too.",
        )
    return out


def baseline_files(directory: Path, limit: int = BASELINE_MAX_BYTES) -> dict[str, str]:
    """The baseline program's text files (relative path -> source), bounded in total."""
    if not directory.is_dir():
        return {}
    files: dict[str, str] = {}
    total = 0
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory)
        if any(part in _SKIPPED or part.startswith(".") for part in rel.parts):
            continue
        if not path.is_file() or path.is_symlink() or path.suffix == ".pyc":
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        total += len(text)
        if total > limit:
            break
        files[rel.as_posix()] = text
    return files


def task_spec(task: Task, spec: EnvSpec) -> TaskSpec:
    s, lim = task.score, task.limits
    return TaskSpec(
        id=task.id,
        title=task.title,
        summary=task.summary,
        description=task.description,
        adapter=task.adapter,
        parameters=dict(task.parameters),
        observation_space=spec.observation_space,
        action_space=spec.action_space,
        metadata=dict(spec.metadata),
        metrics=dict(spec.metrics),
        max_steps=spec.max_steps,
        score=ScoreView(
            metric=s.metric,
            aggregate=s.aggregate,
            direction=s.direction,
            failure_value=s.failure_value,
            description=s.description,
        ),
        budget=budget_view(task),
        limits=LimitsView(
            act_seconds=lim.act_seconds,
            startup_seconds=lim.startup_seconds,
            episode_seconds=lim.episode_seconds,
            memory_mb=lim.memory_mb,
            cpu_seconds=lim.cpu_seconds,
        ),
        rules=rules(task),
        policy_abi=ABI_GUIDE,
        baseline_files=baseline_files(task.baseline_dir),
    )


def remaining(
    task: Task, episodes_used: int, submissions_used: int, deadline: float | None
) -> Remaining:
    b = task.budget
    return Remaining(
        episodes=max(0, b.episodes - episodes_used),
        submissions=max(0, b.submissions - submissions_used),
        wall_seconds=None if deadline is None else round(max(0.0, deadline - time.time()), 3),
    )


def _keep(text: str | None) -> str | None:
    return text


# In a page of many episodes, texts a policy produced are cut to these sizes and a text
# equal to one shown earlier on the page is not repeated; episode=N shows it whole.
# A page then stays well inside what agent CLIs accept from one tool call.
PAGE_TRACEBACK_CHARS = 1200
PAGE_STDERR_CHARS = 600


def _tail(text: str | None, limit: int, index: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return f"[...cut; get_feedback(episode={index}) shows all]\n" + text[-limit:]


def episode_view(
    s: EpisodeSummary,
    redact: Callable[[str | None], str | None] = _keep,
    *,
    seen: dict[str, int] | None = None,
) -> EpisodeView:
    """One episode's public summary; with ``seen`` (a page's memory of texts already
    shown, text -> episode index), long texts are cut, repeats are referenced and
    the adapter's report is left to the episode's own view."""
    traceback, stderr = redact(s.traceback), redact(s.stderr)
    if seen is not None:
        texts: list[str | None] = []
        for text, limit in ((traceback, PAGE_TRACEBACK_CHARS), (stderr, PAGE_STDERR_CHARS)):
            if text and text in seen:
                texts.append(f"[same as episode {seen[text]}]")
                continue
            if text:
                seen[text] = s.index
            texts.append(_tail(text, limit, s.index))
        traceback, stderr = texts
    return EpisodeView(
        index=s.index,
        status=s.status,
        failure=s.failure.value if s.failure is not None else None,
        message=redact(s.message),
        traceback=traceback,
        stderr=stderr,
        episode_return=s.episode_return,
        steps=s.steps,
        terminated=s.terminated,
        truncated=s.truncated,
        metrics=dict(s.metrics),
        report=s.report if seen is None else None,  # long: episode=N carries it
    )


def submission_view(
    *,
    run_id: str,
    submission_id: str,
    status: SubmissionStatus,
    selector: str,
    indices: Sequence[int],
    task: Task,
    program_digest: str,
    remaining: Remaining,
    feedback: Feedback | None,
    partial: Sequence[EpisodeSummary] = (),
    message: str | None = None,
    episode: int | None = None,
    offset: int = 0,
    limit: int = 50,
    redact: Callable[[str | None], str | None] = _keep,
) -> SubmissionView:
    """One page of a submission's public feedback.

    ``feedback`` is the committed feedback of a complete submission; while it
    runs, ``partial`` holds the episodes finished so far. ``redact`` cleans the
    texts a policy wrote (its output may name host paths it can see).
    """
    summaries = (
        list(feedback.episodes) if feedback is not None else sorted(partial, key=lambda s: s.index)
    )
    traces: list[Trace] = list(feedback.traces) if feedback is not None else []
    offset = max(0, offset)
    limit = min(max(1, limit), MAX_PAGE)
    next_offset: int | None = None
    hint: str | None = None
    if episode is not None:
        page = [s for s in summaries if s.index == episode]
        if not page and status == "running":
            hint = f"episode {episode} has not finished yet; call get_feedback again later"
    else:
        page = summaries[offset : offset + limit]
        if offset + limit < len(summaries):
            next_offset = offset + limit
            hint = (
                f"{len(summaries) - next_offset} more episode summaries: call get_feedback "
                f"again with offset={next_offset}"
            )
        elif offset and offset >= len(summaries) and summaries:
            hint = f"offset {offset} is past the last episode summary ({len(summaries)} in all)"
        traced = [t.index for t in traces]
        if traced:
            more = f"step traces of episodes {traced}: get_feedback(episode=N) shows one"
            hint = f"{hint}; {more}" if hint else more
        if any(s.report for s in page):
            more = "each episode's diagnostic report: get_feedback(episode=N)"
            hint = f"{hint}; {more}" if hint else more
    # Step traces are long: a page lists summaries, episode=N carries its trace.
    shown = {s.index for s in page} if episode is not None else set()
    seen: dict[str, int] = {}
    failures = dict(feedback.failures) if feedback is not None else {}
    if feedback is None:
        for s in summaries:
            if s.failure is not None:
                failures[s.failure.value] = failures.get(s.failure.value, 0) + 1
    if message is None and feedback is not None:
        message = feedback.summary_line()
    return SubmissionView(
        run_id=run_id,
        submission_id=submission_id,
        status=status,
        episodes=selector,
        indices_total=len(indices),
        episodes_done=len(indices) if status == "complete" else len(summaries),
        score=feedback.score if feedback is not None else None,
        score_metric=task.score.metric,
        direction=task.score.direction,
        policy_failures=sum(failures.values()),
        failures=failures,
        metrics=dict(feedback.metrics) if feedback is not None else {},
        episode_summaries=[
            episode_view(s, redact, seen=None if episode is not None else seen) for s in page
        ],
        traces=[t for t in traces if t.index in shown],
        offset=offset,
        next_offset=next_offset,
        hint=hint,
        remaining=remaining,
        program_digest=program_digest[:12],
        message=message,
    )


_RUN_STATES: dict[str, RunState] = {
    "open": "open",
    "finalizing": "finalizing",
    "finalized": "finalized",
}


def run_state(state: str) -> RunState:
    try:
        return _RUN_STATES[state]
    except KeyError:
        raise ValueError(f"unknown run state {state!r} in the records") from None


def submission_status(state: str) -> SubmissionStatus:
    """The agent's word for a submission's state in the records."""
    if state == "complete":
        return "complete"
    return "failed" if state == "refunded" else "running"


def run_info(run_id: str, task: Task, state: RunState, rem: Remaining) -> RunInfo:
    return RunInfo(
        run_id=run_id,
        task_id=task.id,
        state=state,
        budget=budget_view(task),
        rules=rules(task),
        remaining=rem,
    )


def run_status(
    run_id: str,
    task: Task,
    state: RunState,
    rem: Remaining,
    episodes_used: int,
    submissions: Sequence[SubmissionRecord],
) -> RunStatus:
    return RunStatus(
        run_id=run_id,
        task_id=task.id,
        open=state == "open",
        state=state,
        episodes_used=episodes_used,
        submissions_used=sum(s.state != "refunded" for s in submissions),
        remaining=rem,
        submissions=[
            SubmissionBrief(
                submission_id=s.id,
                episodes=s.selector,
                indices_total=len(s.indices),
                status=submission_status(s.state),
                score=s.score if s.state == "complete" else None,
                policy_failures=s.policy_failures or 0,
            )
            for s in submissions
        ],
        wall_seconds_left=rem.wall_seconds,
    )
