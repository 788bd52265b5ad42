"""Evaluation: one program over a list of episodes -> feedback.

For each episode the adapter builds a fresh environment in this (trusted)
process and the runner a fresh policy process; the loop here passes
observations out and actions in, and keeps only bounded data: running sums
for the summary and a capped step trace for the first few episodes, so host
memory does not grow with episode length.

Invariants:

- Host and adapter faults raise :class:`EvaluationAborted`; they are never
  reported as a policy failure.
- Results depend only on (program, task, jobs), not on the number of workers
  or their timing: each episode is seeded from its job and runs alone in its
  process, and results are put back in job order.

Two optional episode methods give richer training feedback, and only that:
``report() -> dict`` (bounded JSON, stored in the episode summary) is read
when ``traces`` is true, and ``artifacts() -> {name: bytes}`` (files such as a
replay) only for the traced episodes of an ``evaluate`` given an
``artifacts`` writer. Hidden splits are evaluated with ``traces=False``, so
they produce neither.
"""

from __future__ import annotations

import json
import math
import numbers
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from evopolicy_mcp.adapters.protocol import (
    ARTIFACT_BYTES,
    Adapter,
    AdapterError,
    EnvSpec,
    InvalidAction,
    load_adapter,
)
from evopolicy_mcp.evaluation import seeds
from evopolicy_mcp.evaluation.executor import Episode, Executor, Placement, ThreadExecutor
from evopolicy_mcp.evaluation.feedback import (
    EpisodeSummary,
    Feedback,
    Trace,
    TraceStep,
    bounded_text,
)
from evopolicy_mcp.evaluation.scoring import aggregate_metrics, score_episodes
from evopolicy_mcp.evaluation.snapshot import Program
from evopolicy_mcp.kernel.frames import FrameError
from evopolicy_mcp.runner.template import Failure, PolicyFailure, ProcessLimits, Runner, RunnerError
from evopolicy_mcp.tasks.model import Task, unavailable

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

STDERR_CHARS = 9000  # above process.OUTPUT_HEAD + OUTPUT_TAIL: the head survives
REPORT_CHARS = 16_000  # JSON size of one episode's report()
ArtifactWriter = Callable[[int, str, bytes], None]  # (episode index, file name, content)
T = TypeVar("T")


class EvaluationAborted(Exception):
    """A host or adapter fault stopped the evaluation. Nothing is a policy failure."""


@dataclass(frozen=True)
class EpisodeJob:
    index: int
    env_seed: int
    policy_seed: int


def jobs_for(task: Task, split: str, indices: Sequence[int], secret: bytes) -> list[EpisodeJob]:
    return [
        EpisodeJob(
            index=i,
            env_seed=seeds.episode_seed(secret, task.id, split, i),
            policy_seed=seeds.policy_seed(secret, task.id, split, i),
        )
        for i in indices
    ]


_default_runner: Runner | None = None
_default_lock = threading.Lock()


def default_runner() -> Runner:
    """A process-wide runner, started on first use."""
    global _default_runner
    with _default_lock:
        if _default_runner is None:
            _default_runner = Runner()
        return _default_runner


def policy_context(task: Task, spec: EnvSpec, policy_seed: int) -> dict[str, Any]:
    return {
        "task_id": task.id,
        "observation_space": spec.observation_space,
        "action_space": spec.action_space,
        "parameters": dict(task.parameters),
        "metadata": dict(spec.metadata),
        "policy_seed": policy_seed,
    }


TRACE_ARRAY_ITEMS = 256  # larger arrays (images, RAM) are summarised in traces


def jsonable(value: Any) -> Any:
    """Observations and actions as JSON values for traces: arrays become lists, and an
    array of more than TRACE_ARRAY_ITEMS items (an image) a summary of its shape, dtype
    and value range, so a trace stays readable and small."""
    if hasattr(value, "tolist"):
        size = getattr(value, "size", 0)
        if size > TRACE_ARRAY_ITEMS:
            return {
                "array": list(value.shape),
                "dtype": str(value.dtype),
                "min": jsonable(value.min().item()),
                "max": jsonable(value.max().item()),
                "mean": jsonable(round(float(value.mean()), 4)),
            }
        return value.tolist()
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return value


@dataclass
class _Outcome:
    summary: EpisodeSummary
    trace: Trace | None


class _Episode:
    """Everything one evaluation needs to run its episodes; ``run`` is the executor's work."""

    def __init__(
        self,
        program: Program,
        task: Task,
        adapter: Adapter,
        spec: EnvSpec,
        runner: Runner,
        executor: ThreadExecutor | Executor,
        trace_positions: set[int],
        reports: bool = False,
        save_artifact: ArtifactWriter | None = None,
    ) -> None:
        self.program = program
        self.task = task
        self.adapter = adapter
        self.spec = spec
        self.runner = runner
        self.executor = executor
        self.trace_indices = trace_positions
        self.reports = reports
        self.save_artifact = save_artifact
        lim = task.limits
        self.limits = ProcessLimits(memory_bytes=lim.memory_mb << 20, cpu_seconds=lim.cpu_seconds)
        self.max_steps = spec.max_steps

    def run(self, job: EpisodeJob, slot: int) -> Episode[_Outcome]:
        task, lim = self.task, self.task.limits
        place = (
            self.executor.placement(slot)
            if isinstance(self.executor, ThreadExecutor)
            else Placement(None, None, 0)
        )
        trace: list[TraceStep] | None = [] if job.index in self.trace_indices else None
        trace_cut = False
        episode_return, steps = 0.0, 0
        terminated = truncated = False
        failure: PolicyFailure | None = None
        metrics: dict[str, float] = {}
        report: dict[str, Any] | None = None
        saved: list[str] = []
        started = time.monotonic()
        try:
            with self.runner.open(
                self.program.path,
                self.limits,
                act_seconds=lim.act_seconds,
                startup_seconds=lim.startup_seconds,
                episode_seconds=lim.episode_seconds,
                cpu=place.policy_cpu,
                spin=place.spin,
                shared=place.shared,
            ) as proc:
                proc.send_context(policy_context(task, self.spec, job.policy_seed))
                env = self._adapter_call(self.adapter.make_episode, task.parameters, job.env_seed)
                ended = False  # by the environment, the step limit or a policy failure
                try:
                    observation = self._adapter_call(env.reset)
                    proc.expect_ready()
                    yield proc
                    while True:
                        try:
                            proc.post(observation)
                        except FrameError as exc:  # the adapter's observation cannot be sent
                            raise EvaluationAborted(
                                f"adapter fault: unsendable observation: {exc}"
                            ) from exc
                        action = yield proc
                        try:
                            step = env.step(action)
                        except InvalidAction as exc:
                            raise PolicyFailure(
                                Failure.INVALID_ACTION, f"step {steps}: {exc}"
                            ) from None
                        except Exception as exc:
                            raise EvaluationAborted(f"adapter fault in step(): {exc!r}") from exc
                        reward = _checked_reward(step)
                        if trace is not None:
                            if len(trace) < task.trace_steps:
                                trace.append(
                                    TraceStep(
                                        t=steps,
                                        observation=jsonable(observation),
                                        action=jsonable(action),
                                        reward=reward,
                                    )
                                )
                            else:
                                trace_cut = True
                        episode_return += reward
                        steps += 1
                        observation = step.observation
                        terminated, truncated = bool(step.terminated), bool(step.truncated)
                        if terminated or truncated:
                            break
                        if self.max_steps is not None and steps >= self.max_steps:
                            truncated = True
                            break
                    ended = True
                except PolicyFailure as exc:
                    failure, ended = exc, True
                finally:
                    try:
                        metrics = self._adapter_call(env.metrics)
                        if ended:  # not after a fault: the evaluation is aborted anyway
                            report, saved = self._extras(env, job.index, trace is not None)
                    finally:
                        self._adapter_call(env.close)
            output = proc.output()
        except RunnerError as exc:
            raise EvaluationAborted(f"host fault in the policy runner: {exc}") from exc
        summary = EpisodeSummary(
            index=job.index,
            status="failed" if failure else "ok",
            failure=failure.code if failure else None,
            message=failure.message if failure else None,
            traceback=failure.traceback if failure else None,
            stderr=bounded_text(output, STDERR_CHARS) if output else None,
            episode_return=episode_return,
            steps=steps,
            terminated=terminated,
            truncated=truncated,
            metrics={k: float(v) for k, v in metrics.items()},
            report=report,
            seconds=round(time.monotonic() - started, 6),
        )
        return _Outcome(
            summary,
            Trace(index=job.index, steps=trace, truncated=trace_cut, artifacts=saved)
            if trace is not None
            else None,
        )

    def _extras(
        self, env: Any, index: int, traced: bool
    ) -> tuple[dict[str, Any] | None, list[str]]:
        """The episode's optional artifacts and report, checked against their bounds.
        Artifacts come first, so the report can say what became of them (a replay that
        this machine cannot render)."""
        saved: list[str] = []
        if traced and self.save_artifact is not None and hasattr(env, "artifacts"):
            saved = self._save_artifacts(env, index)
        report = None
        if self.reports and hasattr(env, "report"):
            report = self._adapter_call(env.report)
            if report is not None:
                try:
                    size = len(json.dumps(report, allow_nan=False))
                except (TypeError, ValueError) as exc:
                    raise EvaluationAborted(f"adapter fault: report() is not JSON: {exc}") from exc
                if not isinstance(report, dict) or size > REPORT_CHARS:
                    raise EvaluationAborted(
                        f"adapter fault: report() must be a dict of at most {REPORT_CHARS} "
                        f"JSON characters, got {type(report).__name__} of {size}"
                    )
        return report, saved

    def _save_artifacts(self, env: Any, index: int) -> list[str]:
        assert self.save_artifact is not None
        files = self._adapter_call(env.artifacts)
        if not isinstance(files, dict):
            raise EvaluationAborted("adapter fault: artifacts() must return {name: bytes}")
        if sum(len(data) for data in files.values()) > ARTIFACT_BYTES:
            raise EvaluationAborted(f"adapter fault: artifacts() exceed {ARTIFACT_BYTES} bytes")
        for name, data in files.items():
            if not isinstance(data, bytes) or not name or "/" in name or name.startswith("."):
                raise EvaluationAborted(f"adapter fault: artifact {name!r} is not a plain file")
            try:
                self.save_artifact(index, name, data)
            except Exception as exc:
                raise EvaluationAborted(f"host fault saving artifact {name!r}: {exc!r}") from exc
        return sorted(files)

    @staticmethod
    def _adapter_call(fn: Callable[..., T], *args: Any) -> T:
        try:
            return fn(*args)
        except (EvaluationAborted, PolicyFailure):
            raise
        except Exception as exc:
            raise EvaluationAborted(
                f"adapter fault in {getattr(fn, '__name__', fn)}(): {exc!r}"
            ) from exc


def _checked_reward(step: Any) -> float:
    """The step's reward as a float; anything else is the adapter's fault, not the policy's."""
    reward = getattr(step, "reward", None)
    if type(reward) is float and math.isfinite(reward):
        return reward
    if (
        isinstance(reward, bool)
        or not isinstance(reward, numbers.Real)
        or not math.isfinite(reward)
    ):
        raise EvaluationAborted(
            f"adapter fault: step() returned the reward {reward!r}, not a finite number"
        )
    return float(reward)


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
) -> Feedback:
    """Evaluate ``program`` on ``jobs`` and return its feedback.

    Synchronous and thread-safe. ``on_episode`` is called once per finished
    episode (from the evaluation's host thread), in completion order. ``traces=False``
    (hidden splits) keeps feedback to summaries and aggregates: no step
    traces, no reports, no artifacts. ``artifacts(index, name, data)`` saves
    the files of traced episodes (called from the evaluation's host thread).
    """
    started = time.monotonic()
    missing = unavailable(task)
    if missing is not None:
        raise EvaluationAborted(missing)
    try:
        adapter = load_adapter(task.adapter)
        spec = adapter.spec(task.parameters)
    except AdapterError as exc:
        raise EvaluationAborted(str(exc)) from exc
    except Exception as exc:
        raise EvaluationAborted(f"adapter fault in spec(): {exc!r}") from exc
    pool = executor or ThreadExecutor(workers)
    traced = {job.index for job in jobs[: task.trace_episodes]} if traces else set()
    episode = _Episode(
        program, task, adapter, spec, runner or default_runner(), pool, traced, traces, artifacts
    )
    callback = (lambda outcome: on_episode(outcome.summary)) if on_episode else None
    outcomes = pool.map(episode.run, jobs, callback)
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
