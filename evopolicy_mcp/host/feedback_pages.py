"""A submission's feedback as an agent reads it: a page of episode summaries, or one
episode with its step trace, each within a size.

Like :mod:`evopolicy_mcp.host.public`, everything here takes public inputs only
(a task, a submission's public feedback, budget counts): nothing here can
reach a run secret, a seed or a hidden result.

With ``max_chars`` a result holds as many episode summaries (or trace steps)
as fit in that many characters of its compact text, and its ``hint`` names the
call that shows the rest. Without it (the feedback resource) nothing is cut.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from evopolicy_mcp.evaluation.feedback import EpisodeSummary, Feedback, Trace
from evopolicy_mcp.host.pages import compact_text, largest_fit
from evopolicy_mcp.host.views import (
    EpisodeView,
    EvaluationView,
    Remaining,
    SubmissionStatus,
    SubmissionView,
)
from evopolicy_mcp.tasks.model import Task

__all__ = [
    "MAX_PAGE",
    "episode_view",
    "evaluation_view",
    "submission_view",
]

MAX_PAGE = 200

# In a page of many episodes, texts a policy produced are cut to these sizes and a text
# equal to one shown earlier on the page is not repeated; episode=N shows more of it.
PAGE_TRACEBACK_CHARS = 1200
PAGE_STDERR_CHARS = 600
# One episode's view keeps this much of each text when the whole would not fit.
EPISODE_TRACEBACK_CHARS = 3000
EPISODE_STDERR_CHARS = 2000

Redact = Callable[[str | None], str | None]


def _keep(text: str | None) -> str | None:
    return text


def _tail(text: str | None, limit: int, where: str) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return f"[...{len(text) - limit} characters cut; {where} shows all]\n" + text[-limit:]


def episode_view(
    s: EpisodeSummary, redact: Redact = _keep, *, seen: dict[str, int] | None = None
) -> EpisodeView:
    """One episode's public summary. With ``seen`` (a page's memory of texts already
    shown, text -> episode index) it is a line of a page: long texts are cut, repeats
    are referenced, metrics equal to 0 are left out and the adapter's report is left
    to the episode's own view."""
    traceback, stderr = redact(s.traceback), redact(s.stderr)
    metrics = dict(s.metrics)
    if seen is not None:
        texts: list[str | None] = []
        for text, limit in ((traceback, PAGE_TRACEBACK_CHARS), (stderr, PAGE_STDERR_CHARS)):
            if text and text in seen:
                texts.append(f"[same as episode {seen[text]}]")
                continue
            if text:
                seen[text] = s.index
            texts.append(_tail(text, limit, f"get_feedback(episode={s.index})"))
        traceback, stderr = texts
        metrics = {k: v for k, v in metrics.items() if v != 0}
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
        metrics=metrics,
        report=s.report if seen is None else None,  # long: episode=N carries it
    )


def _failures(feedback: Feedback | None, summaries: Sequence[EpisodeSummary]) -> dict[str, int]:
    if feedback is not None:
        return dict(feedback.failures)
    failures: dict[str, int] = {}
    for s in summaries:
        if s.failure is not None:
            failures[s.failure.value] = failures.get(s.failure.value, 0) + 1
    return failures


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
    redact: Redact = _keep,
    max_chars: int | None = None,
) -> SubmissionView:
    """One page of a submission's public feedback (``episode``: that pool index, with
    its step trace from step ``offset``).

    ``feedback`` is the committed feedback of a complete submission; while it
    runs, ``partial`` holds the episodes finished so far. ``redact`` cleans the
    texts a policy wrote (its output may name host paths it can see).
    """
    summaries = (
        list(feedback.episodes) if feedback is not None else sorted(partial, key=lambda s: s.index)
    )
    failures = _failures(feedback, summaries)
    if message is None and feedback is not None:
        message = feedback.summary_line()
    done = len(indices) if status == "complete" else len(summaries)
    notes: list[str] = []
    if status == "running":
        notes.append(
            f"still running ({done}/{len(indices)} episodes done); evaluation continues in the "
            f"background. Call get_feedback(run_id={run_id!r}, submission_id={submission_id!r}, "
            "wait_seconds=45) to wait for the result"
        )
    common: dict[str, Any] = {
        "run_id": run_id,
        "submission_id": submission_id,
        "status": status,
        "message": message,
        "episodes": selector,
        "indices_total": len(indices),
        "episodes_done": done,
        "score": feedback.score if feedback is not None else None,
        "score_metric": task.score.metric,
        "direction": task.score.direction,
        "policy_failures": sum(failures.values()),
        "failures": failures,
        "metrics": dict(feedback.metrics) if feedback is not None else {},
        "remaining": remaining,
        "program_digest": program_digest[:12],
        "offset": max(0, offset),
    }
    traces = list(feedback.traces) if feedback is not None else []
    if episode is not None:
        found = [s for s in summaries if s.index == episode]
        if not found:
            if status == "running":
                notes.append(f"episode {episode} has not finished yet; call get_feedback later")
            return SubmissionView(**common, hint="; ".join(notes) or None)
        where = (
            f"the resource evopolicy://runs/{run_id}/submissions/{submission_id}/episodes/{episode}"
        )
        trace = next((t for t in traces if t.index == episode), None)
        return _episode_page(common, notes, episode_view(found[0], redact), trace, where, max_chars)
    return _summary_page(
        common, notes, summaries, [t.index for t in traces], limit, redact, max_chars
    )


def _summary_page(
    common: dict[str, Any],
    notes: list[str],
    summaries: list[EpisodeSummary],
    traced: list[int],
    limit: int,
    redact: Redact,
    max_chars: int | None,
) -> SubmissionView:
    offset = common["offset"]
    page = summaries[offset : offset + min(max(1, limit), MAX_PAGE)]
    seen: dict[str, int] = {}
    lines = [episode_view(s, redact, seen=seen) for s in page]

    def build(n: int) -> SubmissionView:
        more = list(notes)
        next_offset = offset + n if offset + n < len(summaries) else None
        if next_offset is not None:
            more.append(
                f"{len(summaries) - next_offset} more episode summaries: call get_feedback "
                f"again with offset={next_offset}"
            )
        elif offset and offset >= len(summaries) and summaries:
            more.append(
                f"offset {offset} is past the last episode summary ({len(summaries)} in all)"
            )
        if traced:
            more.append(f"step traces of episodes {traced}: get_feedback(episode=N) shows one")
        if any(s.report for s in page[:n]):
            more.append("each episode's diagnostic report: get_feedback(episode=N)")
        return SubmissionView(
            **common,
            hint="; ".join(more) or None,
            next_offset=next_offset,
            episode_summaries=lines[:n],
        )

    return largest_fit(build, len(lines), max_chars, least=min(1, len(lines)))


def _episode_page(
    common: dict[str, Any],
    notes: list[str],
    full: EpisodeView,
    trace: Trace | None,
    where: str,
    max_chars: int | None,
) -> SubmissionView:
    """One episode: its summary, its report and as many trace steps from ``offset`` as
    fit. Texts too long to fit are cut to their tails, then the report is left to
    ``where`` (the episode's resource, which holds everything)."""
    offset = common["offset"]
    steps = trace.steps[offset:] if trace is not None else []
    index = full.index

    def pager(shown: EpisodeView) -> Callable[[int], SubmissionView]:
        def build(n: int) -> SubmissionView:
            more = list(notes)
            if shown.report is None and full.report is not None:
                more.append(f"the episode's report is too long to show here: {where} has it")
            next_offset = None
            if trace is not None and n == 0 and steps:
                more.append(f"the step trace does not fit here: {where} has it")
            elif trace is not None and offset + n < len(trace.steps):
                next_offset = offset + n
                more.append(
                    f"trace steps {offset}..{offset + n - 1} of 0..{len(trace.steps) - 1} shown: "
                    f"call get_feedback(episode={index}, offset={next_offset}) for the next"
                )
            elif trace is not None and offset and offset >= len(trace.steps):
                more.append(f"offset {offset} is past the last trace step ({len(trace.steps)})")
            return SubmissionView(
                **common,
                hint="; ".join(more) or None,
                next_offset=next_offset,
                episode_summaries=[shown],
                traces=[trace.model_copy(update={"steps": steps[:n]})] if trace else [],
            )

        return build

    cut = full.model_copy(
        update={
            "traceback": _tail(full.traceback, EPISODE_TRACEBACK_CHARS, where),
            "stderr": _tail(full.stderr, EPISODE_STDERR_CHARS, where),
        }
    )
    for shown in (full, cut, cut.model_copy(update={"report": None})):
        first = pager(shown)(0)
        if max_chars is None or len(compact_text(first)) <= max_chars:
            break
    return largest_fit(pager(shown), len(steps), max_chars, least=0)


def evaluation_view(task: Task, split: str, feedback: Feedback) -> EvaluationView:
    """``evaluate --json``: every episode in full, named as the agent's feedback is."""
    return EvaluationView(
        task_id=task.id,
        split=split,
        indices_total=len(feedback.episodes),
        score=feedback.score,
        score_metric=feedback.score_metric,
        direction=feedback.direction,
        policy_failures=feedback.policy_failures,
        failures=dict(feedback.failures),
        metrics=dict(feedback.metrics),
        seconds=feedback.seconds,
        episode_summaries=[episode_view(s) for s in feedback.episodes],
        traces=list(feedback.traces),
    )
