"""``evopolicy-mcp bench --private-runtime``: what running hidden splits from a private
copy of the runtime costs.

Each round, alternating (the machine's speed drifts), evaluates a CartPole
controller with a fresh runner from the shared runtime (as training does) and
with a fresh runner from a private copy (as the judge's hidden evaluations do):
one episode (the set-up: the template's start, and the copy) and ``episodes``
(a validation's worth). It prints the medians, what the copy holds and how much
memory its tmpfs takes, and a judging's extra time (three candidates' validation
and one assessment: four hidden evaluations) beside the time of its episodes.
It asserts nothing.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from evopolicy_mcp.cli.bench import CONTROLLER
from evopolicy_mcp.evaluation import seeds
from evopolicy_mcp.evaluation.episodes import evaluate, jobs_for
from evopolicy_mcp.evaluation.executor import ThreadExecutor
from evopolicy_mcp.evaluation.executors import private_runtime
from evopolicy_mcp.evaluation.snapshot import capture_files
from evopolicy_mcp.kernel import runtime, sandbox
from evopolicy_mcp.runner.template import Runner
from evopolicy_mcp.tasks.model import get_task

__all__ = ["print_private_bench", "run_private_bench"]

JUDGING_EVALUATIONS = 4  # three candidates' validation, then one assessment
JUDGING_EPISODES = 3 * 64 + 128  # with 64 validation and 128 assessment episodes


def _tmpfs_used(runner: Runner) -> int | None:
    """Bytes in use on the private tmpfs, seen through the template's root."""
    pid = runner.template_pid
    if pid is None:
        return None
    stdlib = runtime.policy_runtime(sandbox.runtime_paths()).grants[0]
    try:
        st = os.statvfs(f"/proc/{pid}/root{stdlib}")
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def run_private_bench(episodes: int = 64, rounds: int = 5) -> dict[str, Any]:
    task = get_task("cartpole")
    secret = seeds.secret_from_seed(0)
    times: dict[str, list[float]] = {
        k: [] for k in ("shared, 1", "private, 1", f"shared, {episodes}", f"private, {episodes}")
    }
    used: list[int] = []
    with tempfile.TemporaryDirectory(prefix="evopolicy-bench-private-") as store:
        program = capture_files({"policy.py": CONTROLLER}, Path(store))
        for _ in range(rounds):
            for count in (1, episodes):
                jobs = jobs_for(task, "validation", range(count), secret)
                for kind in ("shared", "private"):
                    runner = Runner()
                    pool = ThreadExecutor(runner=runner)
                    start = time.perf_counter()
                    try:
                        if kind == "shared":
                            evaluate(program, task, jobs, executor=pool, traces=False)
                        else:
                            with private_runtime(pool) as hidden:
                                evaluate(program, task, jobs, executor=hidden, traces=False)
                                inner = getattr(hidden, "runner", None)
                                if count == 1 and isinstance(inner, Runner):
                                    size = _tmpfs_used(inner)
                                    if size is not None:
                                        used.append(size)
                    finally:
                        pool.close()
                        runner.close()
                    times[f"{kind}, {count}"].append(time.perf_counter() - start)
    files, size = runtime.copy_size(runtime.policy_runtime(sandbox.runtime_paths()))
    medians = {k: statistics.median(v) for k, v in times.items()}
    setup = medians["private, 1"] - medians["shared, 1"]
    return {
        "episodes": episodes,
        "rounds": rounds,
        "seconds": medians,
        "ranges": {k: (min(v), max(v)) for k, v in times.items()},
        "setup_seconds": setup,
        "judging_extra_seconds": JUDGING_EVALUATIONS * setup,
        # The judging's episodes at this task's pace (the 64-episode figure, less its set-up).
        "judging_seconds": JUDGING_EPISODES
        * (medians[f"shared, {episodes}"] - medians["shared, 1"])
        / max(1, episodes - 1),
        "copy_files": files,
        "copy_bytes": size,
        "tmpfs_bytes": statistics.median(used) if used else None,
    }


def print_private_bench(figures: dict[str, Any]) -> None:
    print(
        f"private runtime: {figures['rounds']} rounds, alternating a fresh runner on the "
        "shared runtime and one on a private copy (medians, min-max)"
    )
    for key, value in figures["seconds"].items():
        low, high = figures["ranges"][key]
        label = f"{key} episode{'s' if not key.endswith(', 1') else ''}"
        print(f"  {label:<24} {value * 1000:8.0f} ms  ({low * 1000:.0f}-{high * 1000:.0f})")
    print(f"  set-up per hidden evaluation      {figures['setup_seconds'] * 1000:6.0f} ms")
    print(
        f"  a judging's extra time ({JUDGING_EVALUATIONS} hidden evaluations) "
        f"{figures['judging_extra_seconds']:.2f} s, against {figures['judging_seconds']:.1f} s "
        f"for its {JUDGING_EPISODES} CartPole episodes"
    )
    mib = figures["copy_bytes"] / (1 << 20)
    print(f"  the copy: {figures['copy_files']} files, {mib:.0f} MiB")
    if figures["tmpfs_bytes"] is not None:
        print(
            f"  its tmpfs while the evaluation runs: {figures['tmpfs_bytes'] / (1 << 20):.0f} MiB"
        )
