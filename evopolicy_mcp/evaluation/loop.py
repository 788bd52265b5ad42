"""One episode's loop: a fresh environment and a fresh policy process, observations out,
actions in, bounded data kept.

The adapter builds the environment in this (trusted) process and the runner a
policy process; the loop keeps only running sums for the summary and a capped
step trace for traced episodes, so memory does not grow with episode length.
Every executor runs episodes through :class:`Episodes`, in the host or in a
worker: that is why they give the same outcome for the same job.

Invariant: host and adapter faults raise :class:`EvaluationAborted`; they are
never reported as a policy failure.

Two optional episode methods give richer training feedback, and only that:
``report() -> dict`` (bounded JSON, stored in the episode summary) is read when
the plan asks for reports, and ``artifacts() -> {name: bytes}`` (files such as
a replay) only for traced episodes of a plan that keeps them.
"""

from __future__ import annotations

import json
import math
import numbers
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from evopolicy_mcp.adapters.protocol import Adapter, AdapterError, EnvSpec, InvalidAction
from evopolicy_mcp.adapters.protocol import load_adapter as _load_adapter
from evopolicy_mcp.evaluation.feedback import EpisodeSummary, Trace, TraceStep, bounded_text
from evopolicy_mcp.evaluation.plan import (
    ARTIFACT_BYTES,
    EpisodeJob,
    EvaluationAborted,
    Outcome,
    Plan,
    plain_file_name,
)
from evopolicy_mcp.kernel.frames import FrameError
from evopolicy_mcp.runner.process import PolicyProcess
from evopolicy_mcp.runner.template import Failure, PolicyFailure, ProcessLimits, Runner, RunnerError
from evopolicy_mcp.tasks.model import Task, unavailable

__all__ = ["Episode", "Episodes", "Placement", "load_environment", "policy_context"]

STDERR_CHARS = 9000  # above process.OUTPUT_HEAD + OUTPUT_TAIL: the head survives
REPORT_CHARS = 16_000  # JSON size of one episode's report()
T = TypeVar("T")

Episode = Generator[PolicyProcess, Any, T]
"""One episode as an executor drives it: it yields its policy process whenever it waits
for an answer (READY, or the action for the observation it posted), and is resumed with
the answer, or with the :class:`PolicyFailure` thrown in; it returns its result."""


@dataclass(frozen=True)
class Placement:
    """Where an episode runs: the host's CPU, its policy process's CPU, the spin count,
    and whether other policy processes spin on that CPU too (then each yields between
    its looks)."""

    host_cpu: int | None
    policy_cpu: int | None
    spin: int
    shared: bool = False


def load_environment(task: Task) -> tuple[Adapter, EnvSpec]:
    """The task's adapter and its public spec; any fault is the host's, never the policy's
    (a task whose extra is not installed here included)."""
    missing = unavailable(task)
    if missing is not None:
        raise EvaluationAborted(missing)
    try:
        adapter = _load_adapter(task.adapter)
        return adapter, adapter.spec(task.parameters)
    except AdapterError as exc:
        raise EvaluationAborted(str(exc)) from exc
    except Exception as exc:
        raise EvaluationAborted(f"adapter fault in spec(): {exc!r}") from exc


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


class Episodes:
    """The episodes of one plan on one runner; ``run`` is an executor's work."""

    def __init__(
        self, plan: Plan, runner: Runner, environment: tuple[Adapter, EnvSpec] | None = None
    ) -> None:
        self.plan = plan
        self.task = plan.task
        self.adapter, self.spec = environment or load_environment(plan.task)
        self.runner = runner
        lim = plan.task.limits
        self.limits = ProcessLimits(memory_bytes=lim.memory_mb << 20, cpu_seconds=lim.cpu_seconds)
        self.max_steps = self.spec.max_steps

    def run(self, job: EpisodeJob, place: Placement) -> Episode[Outcome]:
        task, lim = self.task, self.task.limits
        trace: list[TraceStep] | None = [] if job.index in self.plan.traced else None
        trace_cut = False
        episode_return, steps = 0.0, 0
        terminated = truncated = False
        failure: PolicyFailure | None = None
        metrics: dict[str, float] = {}
        report: dict[str, Any] | None = None
        files: dict[str, bytes] = {}
        started = time.monotonic()
        try:
            with self.runner.open(
                self.plan.program.path,
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
                            report, files = self._extras(env, trace is not None)
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
        traced = (
            Trace(index=job.index, steps=trace, truncated=trace_cut, artifacts=sorted(files))
            if trace is not None
            else None
        )
        return Outcome(summary, traced, files)

    def _extras(self, env: Any, traced: bool) -> tuple[dict[str, Any] | None, dict[str, bytes]]:
        """The episode's optional files and report, checked against their bounds. Files
        come first, so the report can say what became of them (a replay that this
        machine cannot render)."""
        files: dict[str, bytes] = {}
        if traced and self.plan.artifacts and hasattr(env, "artifacts"):
            files = self._files(env)
        report = None
        if self.plan.reports and hasattr(env, "report"):
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
        return report, files

    def _files(self, env: Any) -> dict[str, bytes]:
        files = self._adapter_call(env.artifacts)
        if not isinstance(files, dict):
            raise EvaluationAborted("adapter fault: artifacts() must return {name: bytes}")
        if sum(len(data) for data in files.values()) > ARTIFACT_BYTES:
            raise EvaluationAborted(f"adapter fault: artifacts() exceed {ARTIFACT_BYTES} bytes")
        for name, data in files.items():
            if (
                not isinstance(data, bytes)
                or not isinstance(name, str)
                or not plain_file_name(name)
            ):
                raise EvaluationAborted(f"adapter fault: artifact {name!r} is not a plain file")
        return files

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
