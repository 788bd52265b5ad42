"""``evopolicy-mcp bench --sizes``: how much an agent reads from each MCP result.

Over a real stdio server with the built-in tasks (the raw JSON-RPC client of
:mod:`~evopolicy_mcp.cli.bench_mcp`), in a temporary data directory:
``tools/list``; ``describe_task`` of cartpole and crafter (every page); a
cartpole submission of 20 episodes and a crafter submission of 16 (the
``submit_policy`` result, then ``get_feedback`` of it); one Crafter episode
(``get_feedback(episode=0)``); ``run_status``; ``list_tasks``.

For each: the characters of the text content, of the structured content as
compact JSON, and of the JSON-RPC reply as the server wrote it. Clients hand
the model either the text or the structured content. Printed, never asserted
(the bound itself is a test: tests/server/test_result_sizes.py).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from evopolicy_mcp.cli.bench_mcp import RawClient

__all__ = ["print_sizes", "run_sizes"]


def _sizes(client: RawClient, result: dict[str, Any]) -> dict[str, int]:
    text = "".join(b.get("text", "") for b in result.get("content", []))
    structured = result.get("structuredContent")
    return {
        "text": len(text),
        "structured": len(json.dumps(structured, separators=(",", ":"), ensure_ascii=False))
        if structured is not None
        else 0,
        "wire": len(client.last_line.decode()),
    }


def _baseline(task: str) -> dict[str, str]:
    from evopolicy_mcp.tasks.model import get_task

    directory = get_task(task).baseline_dir
    return {"policy.py": (directory / "policy.py").read_text()}


def run_sizes(crafter_episodes: str = "0:16") -> list[dict[str, Any]]:
    """One row per result: what was called and its sizes."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="evopolicy-bench-sizes-") as tmp:
        client = RawClient(Path(tmp) / "data", None, "--seed", "1")  # the same episodes each run
        try:

            def call(label: str, tool: str, **arguments: Any) -> dict[str, Any]:
                result = client.call_result(tool, arguments)
                rows.append({"result": label, **_sizes(client, result)})
                return dict(result.get("structuredContent") or {})

            tools = client.request("tools/list", {})
            wire = len(client.last_line.decode())
            rows.append({"result": "tools/list", "text": 0, "structured": 0, "wire": wire})
            pretty = len(json.dumps(tools, indent=2, ensure_ascii=False))
            rows.append(
                {"result": "tools/list, indented", "text": 0, "structured": 0, "wire": pretty}
            )
            call("list_tasks", "list_tasks")
            for task in ("cartpole", "crafter"):
                page, pages = 1, 1
                while page <= pages:
                    args: dict[str, Any] = {"task_id": task}
                    if page > 1:
                        args["page"] = page
                    spec = call(f"describe_task {task} page {page}", "describe_task", **args)
                    pages = int(spec.get("pages", 1))
                    page += 1
            for task, selector in (("cartpole", "0:20"), ("crafter", crafter_episodes)):
                run_id = call(f"start_run {task}", "start_run", task_id=task)["run_id"]
                view = call(
                    f"submit_policy {task} {selector}",
                    "submit_policy",
                    run_id=run_id,
                    episodes=selector,
                    files=_baseline(task),
                    wait_seconds=50,
                )
                sid = view["submission_id"]
                while view.get("status") == "running":
                    view = client.call(
                        "get_feedback", {"run_id": run_id, "submission_id": sid, "wait_seconds": 45}
                    )
                offset: int | None = 0
                while offset is not None:
                    page_view = call(
                        f"get_feedback {task} offset {offset}",
                        "get_feedback",
                        run_id=run_id,
                        submission_id=sid,
                        offset=offset,
                    )
                    offset = page_view.get("next_offset")
                call(
                    f"get_feedback {task} episode=0",
                    "get_feedback",
                    run_id=run_id,
                    submission_id=sid,
                    episode=0,
                )
                call(f"run_status {task}", "run_status", run_id=run_id)
        finally:
            client.close()
    return rows


def print_sizes(rows: list[dict[str, Any]]) -> None:
    print("characters an agent reads per MCP result (stdio, built-in tasks)")
    print(f"  {'result':<36} {'text':>7} {'structured':>10} {'JSON-RPC':>9}")
    for row in rows:
        print(f"  {row['result']:<36} {row['text']:>7} {row['structured']:>10} {row['wire']:>9}")
