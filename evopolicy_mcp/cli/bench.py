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
- host RSS growth between the 10th and the last harness episode;
- how long another thread of the host (as the server's) waits for the GIL
  while the harness runs: how late its 1 ms sleeps end, in one more harness
  run after the rounds (the waits would slow the rounds' runs).

The episodes are split into rounds, each running every measurement in turn,
and each figure is the median over the rounds: on a shared machine whose
speed drifts from minute to minute, a figure from one stretch of time
compared with another from the next says more about the drift than the
harness. Figures are printed, not asserted: timing tests flake.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["CONTROLLER", "print_bench", "run_bench"]

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


def _raw(episodes: int, max_steps: int, controller: str = CONTROLLER) -> float:
    """Seconds for ``episodes`` raw in-process episodes."""
    import gymnasium as gym

    namespace: dict[str, Any] = {}
    exec(controller, namespace)
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


def _late_wakeups(stop: threading.Event, late: list[float]) -> None:
    """Sleep 1 ms at a time until ``stop``, noting how late each sleep ended (seconds)."""
    while not stop.is_set():
        started = time.perf_counter()
        time.sleep(0.001)
        late.append(time.perf_counter() - started - 0.001)


def run_bench(
    episodes: int = 100, workers: int | None = None, rounds: int = 5, controller: str = CONTROLLER
) -> dict[str, float]:
    """The figures of one run; ``controller`` is the policy measured (it must score 500)."""
    from evopolicy_mcp.evaluation import seeds
    from evopolicy_mcp.evaluation.episodes import evaluate, jobs_for
    from evopolicy_mcp.evaluation.snapshot import capture_files
    from evopolicy_mcp.runner.template import Runner
    from evopolicy_mcp.tasks.model import get_task

    base = get_task("cartpole")
    secret = seeds.secret_from_seed(0)
    rounds = max(1, min(rounds, episodes))
    per_round = max(1, episodes // rounds)
    n_one = max(10, per_round // 2)  # one-worker episodes per length and round

    def task_with(max_steps: int) -> Any:
        params = {**base.parameters, "max_episode_steps": max_steps}
        return base.model_copy(update={"parameters": params, "trace_episodes": 0})

    runner = Runner()
    full, short = task_with(500), task_with(50)
    last = per_round * rounds
    mark = 10 if last > 10 else 1  # RSS growth from this harness episode to the last
    rss: dict[int, float] = {}
    done = [0]

    def on_episode(_summary: Any) -> None:
        done[0] += 1
        if done[0] in (mark, last):
            rss[done[0]] = _rss_mb()

    figures: dict[str, list[float]] = {
        k: [] for k in ("raw", "harness", "ratio", "fixed", "per_step")
    }
    try:
        with tempfile.TemporaryDirectory(prefix="evopolicy-bench-") as store:
            program = capture_files({"policy.py": controller}, Path(store))

            def harness(task: Any, count: int, first: int, **kwargs: Any) -> float:
                """Seconds per episode through the harness."""
                started = time.perf_counter()
                feedback = evaluate(
                    program,
                    task,
                    jobs_for(task, "train", range(first, first + count), secret),
                    runner=runner,
                    **kwargs,
                )
                seconds = (time.perf_counter() - started) / count
                if task is full and feedback.score != 500:
                    raise RuntimeError(f"the benchmark controller scored {feedback.score}, not 500")
                return seconds

            _raw(5, 500, controller)  # warm imports and caches on both sides
            harness(full, 4, 0)
            for r in range(rounds):
                first = 1000 * (r + 1)
                raw_rate = per_round / _raw(per_round, 500, controller)
                rate = 1 / harness(full, per_round, first, workers=workers, on_episode=on_episode)
                over_500 = (
                    harness(full, n_one, first + 500, workers=1)
                    - _raw(n_one, 500, controller) / n_one
                )
                over_50 = (
                    harness(short, n_one, first + 500, workers=1)
                    - _raw(n_one, 50, controller) / n_one
                )
                per_step = (over_500 - over_50) / 450
                figures["raw"].append(raw_rate)
                figures["harness"].append(rate)
                figures["ratio"].append(rate / raw_rate)
                figures["per_step"].append(per_step)
                figures["fixed"].append(over_50 - 50 * per_step)
            stop, late = threading.Event(), [0.0]  # [0.0]: a figure even if no sleep ended
            prober = threading.Thread(target=_late_wakeups, args=(stop, late), daemon=True)
            prober.start()
            try:
                harness(full, per_round, 1000 * (rounds + 1), workers=workers)
            finally:
                stop.set()
                prober.join()
    finally:
        runner.close()
    late.sort()
    med = {k: statistics.median(v) for k, v in figures.items()}
    return {
        "episodes": last,
        "rounds": rounds,
        "raw_episodes_per_s": med["raw"],
        "harness_episodes_per_s": med["harness"],
        "ratio": med["ratio"],
        "ratio_min": min(figures["ratio"]),
        "ratio_max": max(figures["ratio"]),
        "fixed_overhead_ms": med["fixed"] * 1000,
        "per_step_overhead_us": med["per_step"] * 1e6,
        "rss_from_episode": mark,
        "rss_growth_mb": rss[last] - rss[mark],
        "thread_wait_ms_p50": late[len(late) // 2] * 1000,
        "thread_wait_ms_p99": late[int(len(late) * 0.99)] * 1000,
        "thread_wait_ms_max": late[-1] * 1000,
    }


def print_bench(figures: dict[str, Any]) -> None:
    print(
        f"CartPole-v1, 500-step episodes, {figures['episodes']} episodes in "
        f"{figures['rounds']} rounds (medians over the rounds)"
    )
    print(f"  raw in-process loop     {figures['raw_episodes_per_s']:8.1f} episodes/s")
    print(f"  harness (default)       {figures['harness_episodes_per_s']:8.1f} episodes/s")
    print(
        f"  ratio harness/raw       {figures['ratio']:8.2f}   (target >= 0.33; rounds "
        f"{figures['ratio_min']:.2f}-{figures['ratio_max']:.2f})"
    )
    print(f"  fixed per-episode cost  {figures['fixed_overhead_ms']:8.2f} ms (target <= 5)")
    print(f"  per-step overhead       {figures['per_step_overhead_us']:8.2f} us (target <= 10)")
    print(
        f"  host RSS growth {figures['rss_from_episode']}->{figures['episodes']}  "
        f"{figures['rss_growth_mb']:8.2f} MB (target < 20)"
    )
    print(
        f"  another thread's wait   {figures['thread_wait_ms_p50']:8.2f} ms median, "
        f"p99 {figures['thread_wait_ms_p99']:.2f}, max {figures['thread_wait_ms_max']:.2f} "
        "(for the GIL, while the harness runs)"
    )
