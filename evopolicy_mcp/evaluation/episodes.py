"""Evaluation: one program over a list of episodes -> feedback.

:func:`evaluate` makes the evaluation's :class:`~evopolicy_mcp.evaluation.plan.Plan`,
hands its episodes to an executor (the thread executor by default: see
:mod:`~evopolicy_mcp.evaluation.executor`, ``processes`` and ``ray_executor``),
stores the files of traced episodes, and scores the summaries. Each episode
runs through :class:`~evopolicy_mcp.evaluation.loop.Episodes`, wherever it runs.

Invariants:

- Host and adapter faults raise :class:`EvaluationAborted`; they are never
  reported as a policy failure.
- Results depend only on (program, task, jobs), not on the executor, the number
  of workers or their timing: each episode is seeded from its job and runs alone
  in its process, and results are put back in job order.

Hidden splits are evaluated with ``traces=False``: no step traces, no adapter
reports, no files.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from evopolicy_mcp.adapters.protocol import AdapterError
from evopolicy_mcp.evaluation import seeds
from evopolicy_mcp.evaluation.executor import ThreadExecutor, default_runner
from evopolicy_mcp.evaluation.feedback import EpisodeSummary, Feedback
from evopolicy_mcp.evaluation.loop import load_environment, policy_context
from evopolicy_mcp.evaluation.plan import EpisodeJob, EvaluationAborted, Executor, Outcome, Plan
from evopolicy_mcp.evaluation.scoring import aggregate_metrics, score_episodes
from evopolicy_mcp.evaluation.snapshot import Program
from evopolicy_mcp.runner.template import Runner
from evopolicy_mcp.tasks.model import Task

__all__ = [
    "ArtifactWriter",
    "EpisodeJob",
    "EvaluationAborted",
    "Executor",
    "ThreadExecutor",
    "default_runner",
    "evaluate",
    "jobs_for",
    "policy_context",
]

ArtifactWriter = Callable[[int, str, bytes], None]  # (episode index, file name, content)


def jobs_for(task: Task, split: str, indices: Sequence[int], secret: bytes) -> list[EpisodeJob]:
    return [
        EpisodeJob(
            index=i,
            env_seed=seeds.episode_seed(secret, task.id, split, i),
            policy_seed=seeds.policy_seed(secret, task.id, split, i),
        )
        for i in indices
    ]


def evaluate(
    program: Program,
    task: Task,
    jobs: Sequence[EpisodeJob],
    *,
    runner: Runner | None = None,
    workers: int | None = None,
    executor: Executor | None = None,
    on_episode: Callable[[EpisodeSummary], None] | None = None,
    traces: bool = True,
    artifacts: ArtifactWriter | None = None,
    share: str = "",
) -> Feedback:
    """Evaluate ``program`` on ``jobs`` and return its feedback.

    Synchronous and thread-safe. ``executor`` runs the episodes (default: a
    :class:`ThreadExecutor` of ``workers`` episodes at once on ``runner``).
    ``on_episode`` is called once per finished episode, in completion order.
    ``traces=False`` (hidden splits) keeps feedback to summaries and aggregates:
    no step traces, no reports, no files. ``artifacts(index, name, data)`` saves
    the files of traced episodes (before ``on_episode`` hears of the episode).
    ``share`` names whose evaluation this is (a run), for executors that share
    their places between evaluations.
    """
    started = time.monotonic()
    adapter, _spec = load_environment(task)
    pool = executor or ThreadExecutor(workers, runner=runner)
    plan = Plan(
        program=program,
        task=task,
        traced=frozenset(job.index for job in jobs[: task.trace_episodes])
        if traces
        else frozenset(),
        reports=traces,
        artifacts=traces and artifacts is not None,
        share=share,
    )

    def done(outcome: Outcome) -> None:
        if artifacts is not None:
            for name, data in outcome.files.items():
                try:
                    artifacts(outcome.summary.index, name, data)
                except Exception as exc:
                    raise EvaluationAborted(
                        f"host fault saving artifact {name!r}: {exc!r}"
                    ) from exc
        if on_episode is not None:
            on_episode(outcome.summary)

    outcomes = pool.run(plan, jobs, done if artifacts is not None or on_episode else None)
    summaries = [o.summary for o in outcomes]
    failures: dict[str, int] = {}
    for s in summaries:
        if s.failure is not None:
            failures[s.failure.value] = failures.get(s.failure.value, 0) + 1
    try:
        score = score_episodes(summaries, task.score, adapter)
    except AdapterError as exc:
        raise EvaluationAborted(str(exc)) from exc
    return Feedback(
        task_id=task.id,
        score=score,
        score_metric=task.score.metric,
        direction=task.score.direction,
        episodes=summaries,
        metrics=aggregate_metrics(summaries),
        failures=failures,
        traces=[o.trace for o in outcomes if o.trace is not None],
        seconds=round(time.monotonic() - started, 6),
    )
