"""``evopolicy-mcp bench --task ID``: what the harness adds to any task's environment.

The task's baseline program plays the same episodes (same environment and
policy seeds) twice:

- raw: in this process, the adapter's episode stepped directly and the policy
  called directly (action checks included; no policy process, no frames);
- harness: through the full evaluation path (a fresh sandboxed policy process
  per episode, default isolation), at default workers and at one worker.

From one-worker runs at two episode lengths (the task's own, and cut to a few
steps where the adapter takes ``max_episode_steps``) come the fixed cost per
episode and the overhead per step: a least-squares line through each
episode's harness time minus its raw time against its steps. The overhead per
step is also given as a share of a raw step (stepping only, without making
and resetting the environment), and the environment's own step (the
adapter's ``step``: its action check and the simulator, without the
policy's ``act``) is timed apart (mean and median: a game that scores
the episode in its last step shows it in the mean, and the mean without
each episode's last step). Host
RSS is read before and after the harness runs. Figures are printed, not
asserted: timing tests flake on a shared machine.
"""

from __future__ import annotations

import importlib.util
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from evopolicy_mcp.cli.bench import _rss_mb

__all__ = ["print_task_bench", "run_task_bench"]

SHORT = 10  # steps of the short episodes


def _load_policy(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("bench_baseline", path / "policy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _raw(task: Any, jobs: list[Any]) -> list[tuple[int, float, float, list[float]]]:
    """Per episode of ``jobs`` played in-process.

    (steps, seconds in all, seconds stepping, seconds of each call of the
    environment's own ``step``: the adapter's action check and the simulator,
    not the policy).
    """
    from evopolicy_mcp.adapters.protocol import load_adapter
    from evopolicy_mcp.evaluation.episodes import policy_context
    from evopolicy_mcp.policy import PolicyContext

    adapter = load_adapter(task.adapter)
    spec = adapter.spec(task.parameters)
    module = _load_policy(task.baseline_dir)
    out = []
    for job in jobs:
        started = time.perf_counter()
        context = PolicyContext(**policy_context(task, spec, job.policy_seed))
        policy = module.make_policy(context)
        episode = adapter.make_episode(task.parameters, job.env_seed)
        observation, taken, in_env = episode.reset(), 0, []
        clock = time.perf_counter
        stepping = clock()
        while True:
            action = policy.act(observation)
            before = clock()
            step = episode.step(action)
            in_env.append(clock() - before)
            observation, taken = step.observation, taken + 1
            if step.terminated or step.truncated:
                break
            if spec.max_steps is not None and taken >= spec.max_steps:
                break  # where the evaluation stops an episode too
        stepped = time.perf_counter() - stepping
        episode.metrics()
        episode.close()
        out.append((taken, time.perf_counter() - started, stepped, in_env))
    return out


def _fit(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares (intercept, slope) of y on x; None when x does not vary."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    if var == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in points) / var
    return my - slope * mx, slope


def run_task_bench(task_id: str, episodes: int = 20, workers: int | None = None) -> dict[str, Any]:
    from evopolicy_mcp.adapters.protocol import AdapterError, load_adapter
    from evopolicy_mcp.evaluation import seeds
    from evopolicy_mcp.evaluation.episodes import evaluate, jobs_for
    from evopolicy_mcp.evaluation.snapshot import capture
    from evopolicy_mcp.runner.template import Runner
    from evopolicy_mcp.tasks.model import TaskError, get_task, unavailable

    task = get_task(task_id)
    missing = unavailable(task)
    if missing is not None:
        raise TaskError(missing)
    task = task.model_copy(update={"trace_episodes": 0})
    short: Any = task.model_copy(
        update={"parameters": {**task.parameters, "max_episode_steps": SHORT}}
    )
    try:
        load_adapter(short.adapter).spec(short.parameters)
    except AdapterError:
        short = None  # this adapter has no step limit to set: the lengths vary or not
    secret = seeds.secret_from_seed(0)
    jobs = jobs_for(task, "train", range(episodes), secret)
    runner = Runner()
    try:
        with tempfile.TemporaryDirectory(prefix="evopolicy-bench-") as store:
            program = capture(task.baseline_dir, Path(store))

            def harness(t: Any, batch: list[Any], count: int | None) -> tuple[float, list[Any]]:
                started = time.perf_counter()
                feedback = evaluate(program, t, batch, runner=runner, workers=count, traces=False)
                seconds = time.perf_counter() - started
                if feedback.policy_failures:
                    raise RuntimeError(f"the baseline failed: {feedback.failures}")
                return seconds, feedback.episodes

            _raw(task, jobs[:1])  # imports and caches on both sides
            harness(task, jobs[:1], 1)
            rss_before = _rss_mb()
            raw = _raw(task, jobs)
            full_s, full = harness(task, jobs, workers)
            points = []  # (steps, harness minus raw seconds) of one-worker episodes
            for t in (task, short) if short is not None else (task,):
                played = _raw(t, jobs)
                _, summaries = harness(t, jobs, 1)
                points += [
                    (float(e.steps), e.seconds - r[1])
                    for e, r in zip(summaries, played, strict=True)
                ]
            rss_after = _rss_mb()
    finally:
        runner.close()
    steps = sum(r[0] for r in raw)
    raw_s = sum(r[1] for r in raw)
    raw_step = sum(r[2] for r in raw) / max(steps, 1)
    fit = _fit(points)
    fixed, per_step = (None, None) if fit is None else fit
    return {
        "task": task.id,
        "episodes": episodes,
        "steps": steps,
        "mean_episode_steps": steps / episodes,
        "raw_steps_per_s": steps / raw_s,
        "harness_steps_per_s": sum(e.steps for e in full) / full_s,
        "ratio": (sum(e.steps for e in full) / full_s) / (steps / raw_s),
        "raw_episodes_per_s": episodes / raw_s,
        "harness_episodes_per_s": episodes / full_s,
        "raw_step_us": raw_step * 1e6,
        "env_step_us": 1e6 * sum(sum(r[3]) for r in raw) / max(steps, 1),
        "env_step_median_us": 1e6 * statistics.median(t for r in raw for t in r[3]),
        # Without each episode's last step, where a game may score the whole episode.
        "env_step_before_last_us": 1e6
        * sum(sum(r[3][:-1]) for r in raw)
        / max(sum(len(r[3]) - 1 for r in raw), 1),
        "raw_episode_start_ms": 1000 * sum(r[1] - r[2] for r in raw) / episodes,
        "per_step_overhead_us": None if per_step is None else per_step * 1e6,
        "per_step_added_pct": None if per_step is None else 100 * per_step / raw_step,
        "fixed_overhead_ms": None if fixed is None else fixed * 1000,
        "host_rss_mb": rss_after,
        "host_rss_growth_mb": rss_after - rss_before,
    }


def print_task_bench(f: dict[str, Any]) -> None:
    def num(value: Any, fmt: str) -> str:
        return "n/a" if value is None else format(value, fmt)

    print(
        f"{f['task']}: {f['episodes']} episodes of the baseline, {f['mean_episode_steps']:.0f} "
        "steps each on average"
    )
    print(
        f"  raw in-process          {f['raw_steps_per_s']:10.0f} steps/s  ({f['raw_step_us']:.1f} us a step, "
        f"{f['env_step_us']:.1f} us of it in the environment's step: median "
        f"{f['env_step_median_us']:.1f}, {f['env_step_before_last_us']:.1f} without the last steps)"
    )
    print(
        f"  harness (default)       {f['harness_steps_per_s']:10.0f} steps/s  "
        f"(ratio {f['ratio']:.2f}; {f['harness_episodes_per_s']:.1f} episodes/s)"
    )
    print(
        f"  per-step overhead       {num(f['per_step_overhead_us'], '10.1f')} us  "
        f"(+{num(f['per_step_added_pct'], '.0f')}% of a raw step)"
    )
    print(f"  fixed per-episode cost  {num(f['fixed_overhead_ms'], '10.2f')} ms")
    print(
        f"  host RSS                {f['host_rss_mb']:10.1f} MB "
        f"(+{f['host_rss_growth_mb']:.1f} MB over the harness runs)"
    )
