"""``evopolicy-mcp bench --task ID --executor thread,process,ray``: executors side by side.

Each executor named runs the same episodes (the same seeds, so the same steps)
of one task with one program: the task's baseline, the benchmark's CartPole
controller for ``cartpole`` (all 500 steps), or ``--policy DIR``. The episodes
are split into rounds; each round runs every executor in turn on that round's
episodes, and each figure is the median over the rounds, so the machine's
drift from minute to minute weighs on every executor alike. Executors are
started and warmed (worker processes, templates, Ray actors) before the first
round; start-up is reported apart.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["print_executor_bench", "run_executor_bench"]


def _parameter(text: str) -> tuple[str, Any]:
    key, _, value = text.partition("=")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def run_executor_bench(
    task_id: str,
    executors: list[str],
    *,
    episodes: int = 24,
    rounds: int = 3,
    workers: int | None = None,
    ray_address: str | None = None,
    policy: str | None = None,
    parameters: list[str] = (),  # type: ignore[assignment]
    tasks_dirs: list[str] = (),  # type: ignore[assignment]
) -> dict[str, Any]:
    from evopolicy_mcp.cli.bench import CONTROLLER
    from evopolicy_mcp.evaluation import seeds
    from evopolicy_mcp.evaluation.episodes import evaluate, jobs_for
    from evopolicy_mcp.evaluation.executors import make_executor
    from evopolicy_mcp.evaluation.snapshot import capture, capture_files
    from evopolicy_mcp.runner.template import Runner
    from evopolicy_mcp.tasks.model import get_task

    base = get_task(task_id, tasks_dirs)
    params = {**base.parameters, **dict(_parameter(p) for p in parameters)}
    task = base.model_copy(update={"parameters": params, "trace_episodes": 0})
    secret = seeds.secret_from_seed(0)
    rounds = max(1, min(rounds, episodes))
    per_round = max(1, episodes // rounds)
    runner = Runner()
    pools: dict[str, Any] = {}
    figures: dict[str, dict[str, Any]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="evopolicy-bench-") as store:
            if policy is not None:
                program = capture(Path(policy), Path(store))
            elif task_id == "cartpole":
                program = capture_files({"policy.py": CONTROLLER}, Path(store))
            else:
                program = capture(task.baseline_dir, Path(store))
            warm = jobs_for(task, "train", range(10**6, 10**6 + 2), secret)
            for name in executors:
                started = time.perf_counter()
                pools[name] = make_executor(
                    name, workers=workers, runner=runner, ray_address=ray_address
                )
                evaluate(program, task, warm, executor=pools[name])
                figures[name] = {"start_s": time.perf_counter() - started, "rates": [], "steps": []}
            for r in range(rounds):
                jobs = jobs_for(task, "train", range(r * per_round, (r + 1) * per_round), secret)
                for name in executors:
                    started = time.perf_counter()
                    feedback = evaluate(program, task, jobs, executor=pools[name])
                    seconds = time.perf_counter() - started
                    steps = sum(e.steps for e in feedback.episodes)
                    figures[name]["rates"].append(len(jobs) / seconds)
                    figures[name]["steps"].append(steps / seconds)
                    figures[name]["mean_steps"] = steps / len(jobs)
    finally:
        for pool in pools.values():
            pool.close()
        runner.close()
    first = executors[0]
    out: dict[str, Any] = {
        "task": task_id,
        "parameters": params,
        "episodes": per_round * rounds,
        "rounds": rounds,
        "executors": {},
    }
    for name in executors:
        f = figures[name]
        rate = statistics.median(f["rates"])
        out["executors"][name] = {
            "episodes_per_s": rate,
            "steps_per_s": statistics.median(f["steps"]),
            "mean_steps": f["mean_steps"],
            "start_s": f["start_s"],
            "places": getattr(pools[name], "workers", None) or getattr(pools[name], "actors", None),
            "vs_first": rate / statistics.median(figures[first]["rates"]),
            "rounds_vs_first": [
                a / b for a, b in zip(f["rates"], figures[first]["rates"], strict=True)
            ],
        }
    return out


def print_executor_bench(figures: dict[str, Any]) -> None:
    print(
        f"{figures['task']} {json.dumps(figures['parameters'])}: {figures['episodes']} episodes "
        f"in {figures['rounds']} rounds per executor (medians over the rounds)"
    )
    for name, f in figures["executors"].items():
        spread = ", ".join(f"{x:.2f}" for x in f["rounds_vs_first"])
        print(
            f"  {name:<8} {f['places'] or '-':>3} places  {f['episodes_per_s']:8.2f} episodes/s  "
            f"{f['steps_per_s']:9.0f} steps/s  {f['mean_steps']:7.1f} steps/episode  "
            f"x{f['vs_first']:.2f} (rounds {spread})  start {f['start_s']:.1f} s"
        )
