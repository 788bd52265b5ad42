"""``evopolicy-mcp bench --mcp``: the MCP layer's own cost, over a real stdio server.

Measures, in one run:

- p50 / p95 of ``run_status`` and ``get_feedback`` round trips with 100
  submissions in the run, from a plain JSON-RPC client over the server's stdio
  (what the server costs), and p50 from the MCP SDK's Python client, which also
  validates every result against the tool's output schema;
- the wall time of one 100-episode CartPole submission through
  ``submit_policy`` against the kernel's own ``evaluate`` of 100 episodes in
  this process, and the MCP layer's share of it.

The benchmark uses its own task file (cartpole with a budget big enough for
100 submissions) in a temporary directory, and prints figures, never asserts.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evopolicy_mcp.cli.bench import CONTROLLER

__all__ = ["run_mcp_bench"]

ROUND_TRIPS = 200


def _bench_task(tasks_dir: Path) -> None:
    from evopolicy_mcp.tasks.model import get_task

    source = get_task("cartpole").source
    assert source is not None
    text = source.read_text()
    text = text.replace('id = "cartpole"', 'id = "cartpole-bench"', 1)
    head, _, rest = text.partition("[budget]")
    _, _, tail = rest.partition("[validation]")
    budget = "[budget]\nepisodes = 10000\nsubmissions = 200\nper_submission = 100\npool = 100\n\n"
    (tasks_dir / "cartpole-bench.toml").write_text(head + budget + "[validation]" + tail)


def _serve_command(data_dir: Path, tasks_dir: Path | None, *extra: str) -> list[str]:
    """The stdio server the benchmark clients talk to."""
    tasks = ["--tasks-dir", str(tasks_dir)] if tasks_dir is not None else []
    return [
        sys.executable,
        "-m",
        "evopolicy_mcp",
        "serve",
        "--data-dir",
        str(data_dir),
        *tasks,
        *extra,
    ]


class RawClient:
    """JSON-RPC over a stdio server subprocess with no client-side work beyond JSON:
    what the server itself costs per call, as an agent CLI's fast client sees it."""

    def __init__(self, data_dir: Path, tasks_dir: Path | None, *extra: str) -> None:
        self.proc = subprocess.Popen(
            _serve_command(data_dir, tasks_dir, *extra),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.next_id = 0
        self.last_line = b""  # the latest reply as the server wrote it
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "evopolicy-bench", "version": "1"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdout is not None
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{method}: the server closed its output")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                self.last_line = line
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply["result"])

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return dict(self.call_result(tool, arguments).get("structuredContent") or {})

    def call_result(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The whole ``tools/call`` result: content, structured content, error flag."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments})
        if result.get("isError"):
            raise RuntimeError(f"{tool}: {result.get('content')}")
        return result

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _percentiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100)
    return cuts[49] * 1000, cuts[94] * 1000


def _raw_phase(data_dir: Path, tasks_dir: Path, figures: dict[str, float]) -> tuple[str, str]:
    client = RawClient(data_dir, tasks_dir)
    try:
        run_id = client.call("start_run", {"task_id": "cartpole-bench"})["run_id"]
        files = {"policy.py": CONTROLLER}
        last = ""
        for i in range(99):
            last = client.call(
                "submit_policy",
                {"run_id": run_id, "episodes": str(i), "files": files, "wait_seconds": 30},
            )["submission_id"]
        started = time.perf_counter()
        sub = client.call(
            "submit_policy",
            {"run_id": run_id, "episodes": "0:100", "files": files, "wait_seconds": 50},
        )
        figures["mcp_submit_100_seconds"] = time.perf_counter() - started
        if sub["status"] != "complete":
            raise RuntimeError("the 100-episode submission did not complete within 50 s")
        timings: dict[str, list[float]] = {"run_status": [], "get_feedback": []}
        for _ in range(ROUND_TRIPS):
            t0 = time.perf_counter()
            client.call("run_status", {"run_id": run_id})
            t1 = time.perf_counter()
            client.call("get_feedback", {"run_id": run_id, "submission_id": last})
            timings["run_status"].append(t1 - t0)
            timings["get_feedback"].append(time.perf_counter() - t1)
    finally:
        client.close()
    for name, samples in timings.items():
        figures[f"{name}_p50_ms"], figures[f"{name}_p95_ms"] = _percentiles(samples)
    return run_id, last


async def _sdk_phase(
    data_dir: Path, tasks_dir: Path, run_id: str, last: str, figures: dict[str, float]
) -> None:
    from mcp import Client, StdioServerParameters

    command, *args = _serve_command(data_dir, tasks_dir)
    server = StdioServerParameters(command=command, args=args)
    timings: dict[str, list[float]] = {"run_status": [], "get_feedback": []}
    async with Client(server, read_timeout_seconds=300) as client:
        for _ in range(ROUND_TRIPS // 2):
            t0 = time.perf_counter()
            await client.call_tool("run_status", {"run_id": run_id})
            t1 = time.perf_counter()
            await client.call_tool("get_feedback", {"run_id": run_id, "submission_id": last})
            timings["run_status"].append(t1 - t0)
            timings["get_feedback"].append(time.perf_counter() - t1)
    for name, samples in timings.items():
        figures[f"sdk_{name}_p50_ms"] = _percentiles(samples)[0]


def run_mcp_bench() -> dict[str, float]:
    import anyio

    from evopolicy_mcp.evaluation import seeds
    from evopolicy_mcp.evaluation.episodes import evaluate, jobs_for
    from evopolicy_mcp.evaluation.snapshot import capture_files
    from evopolicy_mcp.tasks.model import get_task

    with tempfile.TemporaryDirectory(prefix="evopolicy-bench-mcp-") as tmp:
        root = Path(tmp)
        (root / "tasks").mkdir()
        _bench_task(root / "tasks")
        figures: dict[str, float] = {"submissions_in_run": 100.0}
        run_id, last = _raw_phase(root / "data", root / "tasks", figures)
        anyio.run(_sdk_phase, root / "data", root / "tasks", run_id, last, figures)
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
    print(
        "MCP over stdio, 100 submissions in the run (raw JSON-RPC client; SDK client in brackets)"
    )
    for name in ("run_status", "get_feedback"):
        print(
            f"  {name:<14} p50 {figures[f'{name}_p50_ms']:6.2f} ms  p95 {figures[f'{name}_p95_ms']:6.2f} ms"
            f"  [SDK client p50 {figures[f'sdk_{name}_p50_ms']:6.2f} ms]  (target p50 <= 5)"
        )
    print(
        f"  100-episode submission: MCP {figures['mcp_submit_100_seconds']:.2f} s, "
        f"kernel {figures['kernel_evaluate_100_seconds']:.2f} s, "
        f"overhead {figures['mcp_overhead_percent']:+.1f}% (target <= 5%)"
    )
