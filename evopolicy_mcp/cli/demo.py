"""``evopolicy-mcp demo``: a scripted agent plays one full run on ``cartpole``.

It starts the real server as a subprocess over stdio and talks to it with the
MCP SDK's client, exactly as an agent CLI would (no LLM): list and describe
the task, start a run, submit the weak baseline on a few pool indices, read
the feedback, submit a better controller on the same indices (a matched
comparison), finalize with both, wait for the host to validate and assess,
then print the operator's report, which the agent never sees.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

__all__ = ["IMPROVED_POLICY", "DemoError", "add_demo_arguments", "cmd_demo"]

TASK_ID = "cartpole"

# Push the cart towards the side the pole is falling to, with a damping term on
# the pole's angular velocity: a PD controller that holds CartPole for 500 steps.
IMPROVED_POLICY = '''\
"""PD controller on the pole: push towards the side it is falling to."""

KP = 1.0  # weight of the pole angle (radians)
KD = 0.3  # weight of the pole's angular velocity (radians per step)


def make_policy(context):
    return PoleBalancer()


class PoleBalancer:
    def act(self, observation):
        _x, _x_dot, theta, theta_dot = observation
        return 1 if KP * theta + KD * theta_dot > 0 else 0
'''


class DemoError(Exception):
    """A step of the demo failed; the message says which and why."""


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="records directory for the demo run (default: a fresh temporary directory)",
    )
    parser.add_argument(
        "--episodes", type=int, default=5, help="pool indices each submission uses (default 5)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _say(text: str = "") -> None:
    print(text, flush=True)


async def _call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        text = " ".join(getattr(c, "text", "") for c in result.content)
        raise DemoError(f"{tool} failed: {text}")
    if result.structured_content is None:
        raise DemoError(f"{tool} returned no structured content")
    return dict(result.structured_content)


async def _submit(
    client: Client, run_id: str, selector: str, files: dict[str, str]
) -> dict[str, Any]:
    view = await _call(
        client,
        "submit_policy",
        {"run_id": run_id, "episodes": selector, "files": files, "wait_seconds": 45},
    )
    while view["status"] == "running":
        view = await _call(
            client,
            "get_feedback",
            {"run_id": run_id, "submission_id": view["submission_id"], "wait_seconds": 45},
        )
    if view["status"] != "complete":
        raise DemoError(f"submission {view['submission_id']} ended {view['status']}: {view}")
    return view


def _returns(view: dict[str, Any]) -> str:
    return ", ".join(
        f"{e['index']}: {e['episode_return']:g}"
        + (f" ({e['failure']})" if e.get("failure") else "")
        for e in view["episode_summaries"]
    )


async def _play(data_dir: Path, episodes: int, tasks_dirs: list[str]) -> str:
    """The agent's side. Returns the run id."""
    extra = [a for d in tasks_dirs for a in ("--tasks-dir", str(d))]
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "evopolicy_mcp", "serve", "--data-dir", str(data_dir), *extra],
        env=dict(os.environ),
    )
    _say(f"[agent] starting the server over stdio: {sys.executable} -m evopolicy_mcp serve")
    async with Client(server, read_timeout_seconds=120) as client:
        listed = await _call(client, "list_tasks", {})
        families = ", ".join(f"{f['family']} ({f['tasks']})" for f in listed["families"])
        _say(f"[agent] list_tasks: {listed['total']} tasks; families: {families}")
        family = await _call(client, "list_tasks", {"family": "classic-control"})
        tasks = family["tasks"]
        _say(f"[agent] list_tasks(family='classic-control'): {', '.join(t['id'] for t in tasks)}")
        if TASK_ID not in {t["id"] for t in tasks}:
            raise DemoError(f"the server offers no {TASK_ID!r} task")

        spec = await _call(client, "describe_task", {"task_id": TASK_ID})
        b = spec["budget"]
        _say(f"[agent] describe_task {TASK_ID}: {spec['summary']}")
        _say(
            f"        budget: {b['episodes']} episodes, {b['submissions']} submissions, "
            f"pool of {b['pool']}; baseline files: {', '.join(spec['baseline_files'])}"
        )

        run = await _call(client, "start_run", {"task_id": TASK_ID})
        run_id = run["run_id"]
        _say(f"[agent] start_run: run {run_id}")

        selector = f"0:{min(episodes, b['per_submission'], b['pool'])}"
        base = await _submit(client, run_id, selector, spec["baseline_files"])
        _say(
            f"[agent] submit_policy baseline on {selector}: {base['score_metric']} "
            f"{base['score']:g} -> submission {base['submission_id']}"
        )
        _say(f"        returns by pool index: {_returns(base)}")

        better = await _submit(client, run_id, selector, {"policy.py": IMPROVED_POLICY})
        _say(
            f"[agent] submit_policy PD controller on the same indices {selector}: "
            f"{better['score_metric']} {better['score']:g} -> submission "
            f"{better['submission_id']}"
        )
        _say(f"        returns by pool index: {_returns(better)}")
        left = better["remaining"]
        _say(f"        remaining: {left['episodes']} episodes, {left['submissions']} submissions")

        candidates = [better["submission_id"], base["submission_id"]]
        ack = await _call(client, "finalize", {"run_id": run_id, "candidates": candidates})
        _say(f"[agent] finalize {candidates}: {ack['message']}")

        _say("[host]  validating the candidates and assessing the selected one ...")
        deadline = time.monotonic() + 300
        while (await _call(client, "run_status", {"run_id": run_id}))["state"] != "finalized":
            if time.monotonic() > deadline:
                raise DemoError("the host did not finish validation and assessment in 300 s")
            await anyio.sleep(0.2)
    return run_id


def _operator_report(data_dir: Path, run_id: str, as_json: bool) -> int:
    """What ``evopolicy-mcp report RUN_ID`` prints: it reads the records, starts no host."""
    from evopolicy_mcp.cli.operator import cmd_report

    return cmd_report(argparse.Namespace(run_id=run_id, data_dir=str(data_dir), json=as_json))


def cmd_demo(args: argparse.Namespace) -> int:
    started = time.monotonic()
    given: str | Path | None = getattr(args, "data_dir", None)
    temporary = given is None
    data_dir = Path(given or tempfile.mkdtemp(prefix="evopolicy-demo-")).expanduser().resolve()
    try:
        tasks_dirs = list(getattr(args, "tasks_dir", None) or [])
        run_id = anyio.run(_play, data_dir, getattr(args, "episodes", 5), tasks_dirs)
        _say()
        _say("[operator] the host's report (the agent never sees validation or assessment):")
        if _operator_report(data_dir, run_id, getattr(args, "json", False)) != 0:
            raise DemoError(f"no operator report for run {run_id}")
        _say()
        _say(
            f"demo finished in {time.monotonic() - started:.1f} s. The agent saw only public "
            "feedback; validation and assessment are the operator's."
        )
        if not temporary:
            where = f"--data-dir {data_dir}"
            _say(f"records kept in {data_dir}. The run as a leaderboard row, a page, a dataset:")
            _say(f"  evopolicy-mcp leaderboard {where}")
            _say(f"  evopolicy-mcp report {run_id} {where} --html {run_id}.html")
            _say(f"  evopolicy-mcp export {run_id} {where} {run_id}-bundle")
        return 0
    except DemoError as exc:
        print(f"evopolicy-mcp demo: {exc}", file=sys.stderr)
        return 1
    finally:
        if temporary:
            shutil.rmtree(data_dir, ignore_errors=True)
