"""``evopolicy-mcp bench --mcp``: the MCP layer's own cost, over a real stdio server.

Measures, in one run:

- p50 / p95 of ``run_status`` and ``get_feedback`` round trips with 100
  submissions in the run (the client is the MCP SDK's, the server a subprocess);
- the wall time of one 100-episode CartPole submission through
  ``submit_policy`` against the kernel's own ``evaluate`` of 100 episodes in
  this process, and the MCP layer's share of it.

The benchmark uses its own task file (cartpole with a budget big enough for
100 submissions) in a temporary directory, and prints figures, never asserts.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evopolicy_mcp.bench import CONTROLLER

__all__ = ["run_mcp_bench"]

ROUND_TRIPS = 200


def _bench_task(tasks_dir: Path) -> None:
    from evopolicy_mcp.tasks import get_task

    source = get_task("cartpole").source
    assert source is not None
    text = source.read_text()
    text = text.replace('id = "cartpole"', 'id = "cartpole-bench"', 1)
    head, _, rest = text.partition("[budget]")
    _, _, tail = rest.partition("[validation]")
    budget = "[budget]\nepisodes = 10000\nsubmissions = 200\nper_submission = 100\npool = 100\n\n"
    (tasks_dir / "cartpole-bench.toml").write_text(head + budget + "[validation]" + tail)
    baseline = source.parent / "baselines" / "cartpole"
    (tasks_dir / "baselines").mkdir()
    (tasks_dir / "baselines" / "cartpole").symlink_to(baseline)


async def _measure(data_dir: Path, tasks_dir: Path) -> dict[str, float]:
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "evopolicy_mcp",
            "serve",
            "--data-dir",
            str(data_dir),
            "--tasks-dir",
            str(tasks_dir),
        ],
    )

    async def call(client: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await client.call_tool(tool, args)
        if result.is_error:
            raise RuntimeError(f"{tool}: {result.content}")
        return dict(result.structured_content or {})

    async with Client(server, read_timeout_seconds=300) as client:
        run = await call(client, "start_run", {"task_id": "cartpole-bench"})
        run_id = run["run_id"]
        files = {"policy.py": CONTROLLER}
        last = ""
        for i in range(99):
            sub = await call(
                client,
                "submit_policy",
                {"run_id": run_id, "episodes": str(i % 100), "files": files, "wait_seconds": 30},
            )
            last = sub["submission_id"]

        def percentile(samples: list[float], q: float) -> float:
            return statistics.quantiles(samples, n=100)[int(q) - 1] * 1000

        started = time.perf_counter()
        sub = await call(
            client,
            "submit_policy",
            {"run_id": run_id, "episodes": "0:100", "files": files, "wait_seconds": 50},
        )
        mcp_seconds = time.perf_counter() - started
        if sub["status"] != "complete":
            raise RuntimeError("the 100-episode submission did not complete within 50 s")

        timings: dict[str, list[float]] = {"run_status": [], "get_feedback": []}
        for _ in range(ROUND_TRIPS):
            t0 = time.perf_counter()
            await call(client, "run_status", {"run_id": run_id})
            t1 = time.perf_counter()
            await call(client, "get_feedback", {"run_id": run_id, "submission_id": last})
            t2 = time.perf_counter()
            timings["run_status"].append(t1 - t0)
            timings["get_feedback"].append(t2 - t1)
    figures = {"submissions_in_run": 100.0, "mcp_submit_100_seconds": mcp_seconds}
    for name, samples in timings.items():
        figures[f"{name}_p50_ms"] = percentile(samples, 50)
        figures[f"{name}_p95_ms"] = percentile(samples, 95)
    return figures


def run_mcp_bench() -> dict[str, float]:
    import anyio

    from evopolicy_mcp import seeds
    from evopolicy_mcp.evaluation import evaluate, jobs_for
    from evopolicy_mcp.snapshot import capture_files
    from evopolicy_mcp.tasks import get_task

    with tempfile.TemporaryDirectory(prefix="evopolicy-bench-mcp-") as tmp:
        root = Path(tmp)
        (root / "tasks").mkdir()
        _bench_task(root / "tasks")
        figures = anyio.run(_measure, root / "data", root / "tasks")
        task = get_task("cartpole")
        program = capture_files({"policy.py": CONTROLLER}, root / "programs")
        jobs = jobs_for(task, "train", range(100), seeds.secret_from_seed(1))
        evaluate(program, task, jobs[:4])
        started = time.perf_counter()
        evaluate(program, task, jobs)
        figures["kernel_evaluate_100_seconds"] = time.perf_counter() - started
    kernel = figures["kernel_evaluate_100_seconds"]
    figures["mcp_overhead_percent"] = (figures["mcp_submit_100_seconds"] / kernel - 1) * 100
    return figures


def print_mcp_bench(figures: dict[str, float]) -> None:
    print("MCP over stdio, 100 submissions in the run")
    for name in ("run_status", "get_feedback"):
        print(
            f"  {name:<14} p50 {figures[f'{name}_p50_ms']:7.2f} ms   "
            f"p95 {figures[f'{name}_p95_ms']:7.2f} ms   (target p50 <= 5)"
        )
    print(
        f"  100-episode submission: MCP {figures['mcp_submit_100_seconds']:.2f} s, "
        f"kernel {figures['kernel_evaluate_100_seconds']:.2f} s, "
        f"overhead {figures['mcp_overhead_percent']:+.1f}% (target <= 5%)"
    )
