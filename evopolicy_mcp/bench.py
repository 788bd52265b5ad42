"""``evopolicy-mcp bench``: harness speed against the raw in-process Gymnasium loop.

One run measures, on CartPole-v1 with a controller that survives all 500
steps:

- raw: the controller called in-process, ``gym.make`` + ``reset`` + ``step``
  per episode (the physical limit of this machine);
- harness: the same controller as a submitted program through the full
  evaluation path (fresh policy process per episode, default isolation and
  worker count);
- fixed per-episode and per-step overhead, from one-worker runs at two
  episode lengths (500 and 50 steps), each minus the raw time at that length;
- host RSS growth between the 10th and the 100th harness episode.

Figures are printed, not asserted: the machine is shared and timing tests flake.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["CONTROLLER", "cmd_bench", "run_bench"]

CONTROLLER = """\
def make_policy(context):
    return Balance()


class Balance:
    def act(self, observation):
        x, x_dot, theta, theta_dot = observation
        return 1 if theta + 0.5 * theta_dot + 0.05 * x + 0.1 * x_dot > 0 else 0
"""


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _raw(episodes: int, max_steps: int) -> float:
    """Seconds for ``episodes`` raw in-process episodes."""
    import gymnasium as gym

    namespace: dict[str, Any] = {}
    exec(CONTROLLER, namespace)
    policy = namespace["make_policy"](None)
    started = time.perf_counter()
    for seed in range(episodes):
        env = gym.make("CartPole-v1", max_episode_steps=max_steps)
        observation, _ = env.reset(seed=seed)
        while True:
            observation, _r, terminated, truncated, _ = env.step(policy.act(observation))
            if terminated or truncated:
                break
        env.close()
    return time.perf_counter() - started


def run_bench(episodes: int = 100, workers: int | None = None) -> dict[str, float]:
    from evopolicy_mcp import seeds
    from evopolicy_mcp.evaluation import evaluate, jobs_for
    from evopolicy_mcp.runner import Runner
    from evopolicy_mcp.snapshot import capture_files
    from evopolicy_mcp.tasks import get_task

    base = get_task("cartpole")
    secret = seeds.secret_from_seed(0)

    def task_with(max_steps: int) -> Any:
        params = {**base.parameters, "max_episode_steps": max_steps}
        return base.model_copy(update={"parameters": params, "trace_episodes": 0})

    runner = Runner()
    with tempfile.TemporaryDirectory(prefix="evopolicy-bench-") as store:
        program = capture_files({"policy.py": CONTROLLER}, Path(store))
        full, short = task_with(500), task_with(50)
        _raw(5, 500)  # warm imports and caches on both sides
        evaluate(program, full, jobs_for(full, "train", range(4), secret), runner=runner)

        raw_seconds = _raw(episodes, 500)
        rss: dict[int, float] = {}

        def on_episode(_summary: Any, count: list[int] = [0]) -> None:  # noqa: B006
            count[0] += 1
            if count[0] in (10, episodes):
                rss[count[0]] = _rss_mb()

        started = time.perf_counter()
        feedback = evaluate(
            program,
            full,
            jobs_for(full, "train", range(episodes), secret),
            runner=runner,
            workers=workers,
            on_episode=on_episode,
        )
        harness_seconds = time.perf_counter() - started
        if feedback.score != 500:
            raise RuntimeError(f"the benchmark controller scored {feedback.score}, not 500")

        n_one = max(20, episodes // 2)
        one: dict[int, float] = {}
        raw_one: dict[int, float] = {}
        for length, task in ((500, full), (50, short)):
            started = time.perf_counter()
            evaluate(
                program,
                task,
                jobs_for(task, "train", range(n_one), secret),
                runner=runner,
                workers=1,
            )
            one[length] = (time.perf_counter() - started) / n_one
            raw_one[length] = _raw(n_one, length) / n_one
    runner.close()
    over_500 = one[500] - raw_one[500]
    over_50 = one[50] - raw_one[50]
    per_step = (over_500 - over_50) / 450
    fixed = over_50 - 50 * per_step
    raw_rate = episodes / raw_seconds
    harness_rate = episodes / harness_seconds
    return {
        "episodes": episodes,
        "raw_episodes_per_s": raw_rate,
        "harness_episodes_per_s": harness_rate,
        "ratio": harness_rate / raw_rate,
        "fixed_overhead_ms": fixed * 1000,
        "per_step_overhead_us": per_step * 1e6,
        "rss_growth_mb_10_to_100": rss.get(episodes, float("nan")) - rss.get(10, float("nan")),
    }


def cmd_bench(args: argparse.Namespace) -> int:
    if args.mcp:
        from evopolicy_mcp.bench_mcp import print_mcp_bench, run_mcp_bench

        mcp_figures = run_mcp_bench()
        if args.json:
            print(json.dumps(mcp_figures, indent=2))
        else:
            print_mcp_bench(mcp_figures)
        return 0
    figures = run_bench(args.episodes, args.workers)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"CartPole-v1, 500-step episodes, {figures['episodes']} episodes")
    print(f"  raw in-process loop     {figures['raw_episodes_per_s']:8.1f} episodes/s")
    print(f"  harness (default)       {figures['harness_episodes_per_s']:8.1f} episodes/s")
    print(f"  ratio harness/raw       {figures['ratio']:8.2f}   (target >= 0.33)")
    print(f"  fixed per-episode cost  {figures['fixed_overhead_ms']:8.2f} ms (target <= 5)")
    print(f"  per-step overhead       {figures['per_step_overhead_us']:8.2f} us (target <= 10)")
    print(
        f"  host RSS growth 10->{figures['episodes']}  {figures['rss_growth_mb_10_to_100']:8.2f} MB (target < 20)"
    )
    return 0
