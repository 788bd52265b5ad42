"""``evopolicy-mcp bench --task ID``: what the harness adds to any task's environment.

The task's baseline program plays the same episodes (same environment and
policy seeds) twice:

- raw: in this process, the adapter's episode stepped directly and the policy
  called directly (action checks included; no policy process, no frames);
- harness: through the full evaluation path (a fresh sandboxed policy process
  per episode, default isolation), at default workers and at one worker.

From the one-worker run at two episode lengths (the task's own, and cut to a
few steps where the adapter takes ``max_episode_steps``) come the fixed cost
per episode and the overhead per step, each as harness minus raw on the same
episodes; the overhead per step is also given as a share of a raw step. Host
RSS is read before and after the harness runs. Figures are printed, not
asserted: timing tests flake on a shared machine.
"""

from __future__ import annotations

import importlib.util
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


def _raw(task: Any, jobs: list[Any]) -> tuple[float, int]:
    """Seconds and steps of ``jobs`` played in-process."""
    from evopolicy_mcp.adapters.protocol import load_adapter
    from evopolicy_mcp.evaluation.episodes import policy_context
    from evopolicy_mcp.policy import PolicyContext

    adapter = load_adapter(task.adapter)
    spec = adapter.spec(task.parameters)
    module = _load_policy(task.baseline_dir)
    steps = 0
    started = time.perf_counter()
    for job in jobs:
        context = PolicyContext(**policy_context(task, spec, job.policy_seed))
        policy = module.make_policy(context)
        episode = adapter.make_episode(task.parameters, job.env_seed)
        observation, taken = episode.reset(), 0
        while True:
            step = episode.step(policy.act(observation))
            observation, taken = step.observation, taken + 1
            if step.terminated or step.truncated:
                break
            if spec.max_steps is not None and taken >= spec.max_steps:
                break  # where the evaluation stops an episode too
        steps += taken
        episode.metrics()
        episode.close()
    return time.perf_counter() - started, steps


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
        short = None  # this adapter has no step limit to set: no short episodes
    secret = seeds.secret_from_seed(0)
    jobs = jobs_for(task, "train", range(episodes), secret)
    one = jobs_for(task, "train", range(1000, 1000 + max(4, episodes // 2)), secret)
    runner = Runner()
    try:
        with tempfile.TemporaryDirectory(prefix="evopolicy-bench-") as store:
            program = capture(task.baseline_dir, Path(store))

            def harness(t: Any, batch: list[Any], count: int | None) -> tuple[float, int]:
                started = time.perf_counter()
                feedback = evaluate(program, t, batch, runner=runner, workers=count, traces=False)
                seconds = time.perf_counter() - started
                if feedback.policy_failures:
                    raise RuntimeError(f"the baseline failed: {feedback.failures}")
                return seconds, sum(e.steps for e in feedback.episodes)

            _raw(task, jobs[:1])  # imports and caches on both sides
            harness(task, jobs[:1], 1)
            rss_before = _rss_mb()
            raw_s, raw_steps = _raw(task, jobs)
            full_s, full_steps = harness(task, jobs, workers)
            raw_one_s, raw_one_steps = _raw(task, one)
            one_s, one_steps = harness(task, one, 1)
            per_step = fixed = None
            if short is not None:
                raw_short_s, raw_short_steps = _raw(short, one)
                short_s, short_steps = harness(short, one, 1)
                n = len(one)
                over_long = (one_s - raw_one_s) / n
                over_short = (short_s - raw_short_s) / n
                steps_long, steps_short = one_steps / n, short_steps / n
                if steps_long > steps_short:
                    per_step = (over_long - over_short) / (steps_long - steps_short)
                    fixed = over_short - per_step * steps_short
            rss_after = _rss_mb()
    finally:
        runner.close()
    raw_step = raw_one_s / max(raw_one_steps, 1)
    return {
        "task": task.id,
        "episodes": episodes,
        "steps": raw_steps,
        "mean_episode_steps": raw_steps / episodes,
        "raw_steps_per_s": raw_steps / raw_s,
        "harness_steps_per_s": full_steps / full_s,
        "ratio": (full_steps / full_s) / (raw_steps / raw_s),
        "raw_episodes_per_s": episodes / raw_s,
        "harness_episodes_per_s": episodes / full_s,
        "one_worker_steps_per_s": one_steps / one_s,
        "raw_step_us": raw_step * 1e6,
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
        f"  raw in-process          {f['raw_steps_per_s']:10.0f} steps/s  ({f['raw_step_us']:.1f} us a step)"
    )
    print(
        f"  harness (default)       {f['harness_steps_per_s']:10.0f} steps/s  "
        f"(ratio {f['ratio']:.2f}; {f['harness_episodes_per_s']:.1f} episodes/s)"
    )
    print(f"  harness (one worker)    {f['one_worker_steps_per_s']:10.0f} steps/s")
    print(
        f"  per-step overhead       {num(f['per_step_overhead_us'], '10.1f')} us  "
        f"(+{num(f['per_step_added_pct'], '.0f')}% of a raw step)"
    )
    print(f"  fixed per-episode cost  {num(f['fixed_overhead_ms'], '10.2f')} ms")
    print(
        f"  host RSS                {f['host_rss_mb']:10.1f} MB "
        f"(+{f['host_rss_growth_mb']:.1f} MB over the harness runs)"
    )
