"""What an agent may see: building the agent views from tasks and records.

Every function here takes public inputs only (a task, submission records and
their public feedback, budget counts) and returns a :mod:`evopolicy_mcp.host.views`
model. Nothing here can reach a run secret, a seed or a hidden result: the
host passes none of them in (a run record, which holds the secret, never
comes here).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from evopolicy_mcp.adapters.protocol import EnvSpec
from evopolicy_mcp.host.errors import HostError
from evopolicy_mcp.host.guide import ABI_GUIDE
from evopolicy_mcp.host.pages import compact_text, largest_fit
from evopolicy_mcp.host.views import (
    BudgetView,
    FamilyBrief,
    LimitsView,
    Remaining,
    RunInfo,
    RunState,
    RunStatus,
    ScoreView,
    SubmissionBrief,
    SubmissionStatus,
    TaskInfo,
    TaskList,
    TaskSpec,
)
from evopolicy_mcp.store.eviction import Evicted
from evopolicy_mcp.store.records import SubmissionRecord
from evopolicy_mcp.tasks.model import FamilyInfo, Task, unavailable

__all__ = [
    "evicted_note",
    "BASELINE_MAX_BYTES",
    "FINALIZE_MESSAGE",
    "baseline_files",
    "budget_view",
    "remaining",
    "rules",
    "run_info",
    "run_state",
    "run_status",
    "submission_status",
    "task_info",
    "task_list",
    "task_spec",
]

BASELINE_MAX_BYTES = 256 * 1024
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
        finish=b.finish,
    )


def task_info(task: Task) -> TaskInfo:
    return TaskInfo(
        id=task.id,
        family=task.family,
        title=task.title,
        summary=task.summary,
        budget=budget_view(task),
        available=unavailable(task) is None,
    )


def task_list(
    tasks: Sequence[Task],
    families: dict[str, FamilyInfo],
    *,
    offset: int = 0,
    max_chars: int | None = None,
) -> TaskList:
    """``tasks`` from ``offset``, as many as fit ``max_chars``, after a line per family
    (the hint names the offset of the rest)."""
    offset = max(0, offset)
    counts: dict[str, list[int]] = {}
    for t in tasks:
        seen = counts.setdefault(t.family, [0, 0])
        seen[0] += 1
        seen[1] += unavailable(t) is None
    briefs = [
        FamilyBrief(
            family=f,
            title=families[f].title if f in families else f,
            tasks=n,
            available=ok,
        )
        for f, (n, ok) in sorted(counts.items())
    ]
    infos = [task_info(t) for t in tasks[offset:]]

    def build(n: int) -> TaskList:
        following = offset + n if offset + n < len(tasks) else None
        hint = None
        if following is not None:
            hint = (
                f"{len(tasks) - following} more tasks: call list_tasks again with "
                f"offset={following}"
            )
            if len(briefs) > 1:
                hint += ", or list_tasks(family=F) for one family's tasks"
        elif offset and offset >= len(tasks):
            hint = f"offset {offset} is past the last task ({len(tasks)} in all)"
        return TaskList(
            families=briefs,
            total=len(tasks),
            offset=offset,
            next_offset=following,
            hint=hint,
            tasks=infos[:n],
        )

    return largest_fit(build, len(infos), max_chars, least=min(1, len(infos)))


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
    if b.finish == "exhaust":
        out.append(
            f"Spend the whole budget: finalize is refused while any of the {b.episodes} "
            "episodes remain (unless the submissions or the wall time run out first), and "
            "submit_policy refuses a selector that would leave more episodes than the "
            "remaining submissions can spend."
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


# The fields that fill pages in this order, on the first as far as they fit: a rich
# environment's spaces alone can fill a page (the Shadow hand's 63 named components).
_LATER_FIELDS = (
    "observation_space",
    "action_space",
    "baseline_files",
    "policy_abi",
    "rules",
    "metrics",
    "metadata",
)
_HINT_CHARS = 300  # room kept on a page for its hint


def task_spec(
    task: Task, spec: EnvSpec, *, page: int = 1, max_chars: int | None = None
) -> TaskSpec:
    """The task's public spec; with ``max_chars``, page ``page`` of it (pages of whole
    fields, each within ``max_chars`` unless one field alone is longer)."""
    s, lim = task.score, task.limits
    full = TaskSpec(
        id=task.id,
        family=task.family,
        title=task.title,
        summary=task.summary,
        description=task.description,
        adapter=task.adapter,
        parameters=dict(task.parameters),
        observation_space=spec.observation_space,
        action_space=spec.action_space,
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
        baseline_files=baseline_files(task.baseline_dir),
        policy_abi=ABI_GUIDE,
        rules=rules(task),
        metrics=dict(spec.metrics),
        metadata=dict(spec.metadata),
    )
    if max_chars is None:
        return full
    pages = _spec_pages(full, max_chars - _HINT_CHARS)
    if not 1 <= page <= len(pages):
        raise HostError(
            "bad_page", f"task {task.id} has {len(pages)} page(s); page must be 1..{len(pages)}"
        )
    fields = set(pages[page - 1]) | (_FIRST_PAGE if page == 1 else set())
    hint = None
    if page < len(pages):
        hint = (
            f"page {page} of {len(pages)}; describe_task(task_id={task.id!r}, page={page + 1}) "
            f"has {', '.join(pages[page])}"
        )
    return _only(full, fields).model_copy(update={"page": page, "pages": len(pages), "hint": hint})


_PAGING = {"id", "page", "pages", "hint"}
_FIRST_PAGE = set(TaskSpec.model_fields) - set(_LATER_FIELDS) - _PAGING


def _only(spec: TaskSpec, fields: set[str]) -> TaskSpec:
    """``spec`` with only ``fields`` (and its id and paging fields) set."""
    return spec.model_copy(
        update={f: None for f in TaskSpec.model_fields if f not in fields | _PAGING}
    )


def _spec_pages(full: TaskSpec, max_chars: int) -> list[list[str]]:
    """The later fields each page holds, in order; page 1 also holds every earlier field."""
    pages: list[list[str]] = [[]]
    for name in _LATER_FIELDS:
        fields = {*pages[-1], name} | (_FIRST_PAGE if len(pages) == 1 else set())
        if len(compact_text(_only(full, fields))) > max_chars:
            pages.append([name])
        else:
            pages[-1].append(name)
    return pages


def remaining(
    task: Task, episodes_used: int, submissions_used: int, deadline: float | None
) -> Remaining:
    b = task.budget
    return Remaining(
        episodes=max(0, b.episodes - episodes_used),
        submissions=max(0, b.submissions - submissions_used),
        wall_seconds=None if deadline is None else round(max(0.0, deadline - time.time()), 3),
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
    *,
    offset: int = 0,
    max_chars: int | None = None,
) -> RunStatus:
    """The run's state and its submissions from ``offset``; with ``max_chars``, as
    many as fit (the hint names the offset of the rest)."""
    offset = max(0, offset)
    briefs = [
        SubmissionBrief(
            submission_id=s.id,
            episodes=s.selector,
            indices_total=len(s.indices),
            status=submission_status(s.state),
            score=s.score if s.state == "complete" else None,
            policy_failures=s.policy_failures or 0,
        )
        for s in submissions[offset:]
    ]

    def build(n: int) -> RunStatus:
        following = offset + n if offset + n < len(submissions) else None
        hint = None
        if following is not None:
            hint = (
                f"{len(submissions) - following} more submissions: call run_status again "
                f"with offset={following}"
            )
        elif offset and offset >= len(submissions):
            hint = f"offset {offset} is past the last submission ({len(submissions)} in all)"
        return RunStatus(
            run_id=run_id,
            task_id=task.id,
            open=state == "open",
            state=state,
            episodes_used=episodes_used,
            submissions_used=sum(s.state != "refunded" for s in submissions),
            remaining=rem,
            wall_seconds_left=rem.wall_seconds,
            hint=hint,
            offset=offset,
            next_offset=following,
            submissions=briefs[:n],
        )

    return largest_fit(build, len(briefs), max_chars, least=min(1, len(briefs)))


def evicted_note(gone: Evicted, task: Task) -> str:
    """The agent's sentence for a submission whose bulky feedback was evicted."""
    what = []
    if gone.traces:
        what.append(f"{gone.traces} step trace(s)")
    if gone.files:
        what.append(f"{len(gone.files)} episode file(s)")
    return (
        f"{' and '.join(what) or 'its bulky feedback'} were evicted to keep this run within "
        f"its {task.storage_mb:g} MiB of stored traces and files (older submissions go first; "
        "scores and episode summaries stay); submit again on the same indices to see them"
    )
