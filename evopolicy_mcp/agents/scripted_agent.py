"""An agent program with no model behind it: improve-and-compare over MCP.

A launcher starts it exactly like an agent CLI (cwd = the workspace, stdin
closed, its own process group)::

    python -m evopolicy_mcp.agents.scripted_agent --mcp-config FILE \\
        [--server evopolicy] [--task ID] [--seed N] [--rounds N] [--episodes K] \\
        [--server-log FILE] [PROMPT ...]

FILE is a Claude-Code-shaped config (``{"mcpServers": {NAME: {"type": "stdio",
"command", "args", "env", "timeout"}}}``, or ``"type": "http"`` with ``"url"``
and an ``Authorization`` header, see :func:`.config.render`).
The task id comes from ``--task``, else from the prompt's "Evolve a policy for
the task `ID`.", else from a server that lists exactly one task.

The strategy: submit the baseline in ``program/`` on the first K pool indices,
then write candidates into ``program/policy.py`` (a linear map of the
observation, drawn at random until one beats the baseline, then hill-climbed
around the best) and evaluate each on the same K indices, a matched
comparison, keeping it only if it scores better in the task's direction.
Spaces it has no candidate family for get the baseline alone. It finalizes
with the best few distinct programs, best first.

Stdout is its structured log, one JSON object per line, flushed as it goes:
``{"type": "tool_call" | "tool_result" | "plan" | "compare" | "result", ...}``.
A rejected tool call is logged and handled; when the run cannot go on, the
last line is ``{"type": "result", "finalized": false, "error": ...}``, stderr
gets one line and the exit code is 1. The server's stderr goes to
``--server-log`` (default: discarded, as the server's log may name host
paths that do not belong in the workspace), so this program's own stderr
stays its one-line verdict.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from .client import transport
from .config import Launch, Remote
from .policy_family import Family, Params, family_for

__all__ = ["AgentError", "Family", "family_for", "main", "task_from_prompt"]

PROG = "scripted_agent"
WAIT_SECONDS = 45.0  # under the server's 50 s cap on one call's wait
MAX_WAIT_SECONDS = 3600.0  # one submission's evaluation, beyond which the agent gives up
SIGMA_START, SIGMA_DECAY, SIGMA_MIN = 0.5, 0.8, 0.05
_PROMPT_TASK = re.compile(r"Evolve a policy for the task `([^`]+)`")


class AgentError(Exception):
    """The run cannot go on; the message is the one line for stderr."""

    def __init__(self, message: str, run_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.run_id = run_id


class Rejected(AgentError):
    """A tool call came back as an error result (already logged)."""


def emit(record: dict[str, Any]) -> None:
    """One line of the structured log."""
    try:
        sys.stdout.write(json.dumps(record, separators=(",", ":"), default=str) + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):  # nobody is reading any more; carry on
        pass


def task_from_prompt(prompt: str) -> str | None:
    match = _PROMPT_TASK.search(prompt)
    return match.group(1) if match else None


# ------------------------------------------------------------ the MCP side


@dataclass
class Tried:
    submission_id: str
    label: str
    score: float | None
    policy_failures: int
    digest: str
    source: str
    params: Params | None
    order: int


@dataclass
class Plan:
    selector: str
    episodes: int
    rounds: int
    direction: str
    max_candidates: int
    tried: list[Tried] = field(default_factory=list)

    def key(self, t: Tried) -> tuple[float, int, int]:
        """Smaller is better: score in the task's direction, then fewer failures, then earlier."""
        if t.score is None or math.isnan(t.score):
            return (math.inf, t.policy_failures, t.order)
        return (-t.score if self.direction == "maximize" else t.score, t.policy_failures, t.order)

    def ranked(self) -> list[Tried]:
        return sorted((t for t in self.tried if t.score is not None), key=self.key)


def _error_text(result: Any) -> str:
    text = " ".join(getattr(block, "text", "") for block in result.content).strip()
    return text or "the tool call was rejected"


_SUBMISSION_KEYS = (
    "submission_id",
    "status",
    "score",
    "policy_failures",
    "failures",
    "episodes",
    "episodes_done",
    "indices_total",
    "remaining",
    "message",
)
_RUN_KEYS = ("run_id", "state", "budget", "remaining", "candidates", "message")


def _summary(tool: str, content: dict[str, Any]) -> dict[str, Any]:
    """What a result line shows: the few fields the strategy reads."""
    if tool == "list_tasks":
        return {
            "total": content.get("total"),
            "tasks": [t.get("id") for t in content.get("tasks", [])],
        }
    if tool == "describe_task":
        return {
            "task": content.get("id"),
            "score": content.get("score"),
            "budget": content.get("budget"),
            "observation_space": {
                k: v for k, v in content.get("observation_space", {}).items() if k != "components"
            },
            "action_space": {
                k: v for k, v in content.get("action_space", {}).items() if k != "components"
            },
        }
    if tool in ("submit_policy", "get_feedback"):
        return {k: content.get(k) for k in _SUBMISSION_KEYS}
    return {k: content[k] for k in _RUN_KEYS if k in content}


class Agent:
    def __init__(self, client: Client, args: argparse.Namespace, workspace: Path) -> None:
        self.client = client
        self.args = args
        self.rng = random.Random(args.seed)
        self.program = workspace / "program"
        self.run_id: str | None = None
        self.left: dict[str, Any] = {}  # the run's remaining budget, from the latest view

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        emit({"type": "tool_call", "tool": tool, "args": arguments})
        result = await self.client.call_tool(tool, arguments)
        if result.is_error:
            text = _error_text(result)
            emit({"type": "tool_result", "tool": tool, "is_error": True, "error": text})
            raise Rejected(f"{tool} was rejected: {text}")
        content = dict(result.structured_content or {})
        emit(
            {
                "type": "tool_result",
                "tool": tool,
                "is_error": False,
                "summary": _summary(tool, content),
            }
        )
        return content

    async def describe(self, task: str) -> dict[str, Any]:
        """The task's whole spec: every page of describe_task, merged."""
        spec = await self.call("describe_task", {"task_id": task})
        for page in range(2, int(spec.get("pages", 1)) + 1):
            spec.update(await self.call("describe_task", {"task_id": task, "page": page}))
        return spec

    async def evaluate(self, plan: Plan, label: str, source: str, params: Params | None) -> Tried:
        """Submit ``program/`` as it is now on the plan's indices and wait for its score."""
        assert self.run_id is not None
        view = await self.call(
            "submit_policy",
            {
                "run_id": self.run_id,
                "episodes": plan.selector,
                "program_dir": str(self.program.resolve()),
                "wait_seconds": WAIT_SECONDS,
            },
        )
        waited = 0.0
        while view["status"] == "running":
            if waited >= MAX_WAIT_SECONDS:
                raise AgentError(f"submission {view['submission_id']} ran over {waited:.0f} s")
            view = await self.call(
                "get_feedback",
                {
                    "run_id": self.run_id,
                    "submission_id": view["submission_id"],
                    "wait_seconds": WAIT_SECONDS,
                    "limit": 1,
                },
            )
            waited += WAIT_SECONDS
        tried = Tried(
            submission_id=view["submission_id"],
            label=label,
            score=view.get("score") if view["status"] == "complete" else None,
            policy_failures=int(view.get("policy_failures") or 0),
            digest=view.get("program_digest", ""),
            source=source,
            params=params,
            order=len(plan.tried),
        )
        plan.tried.append(tried)
        self.left = view["remaining"]
        return tried

    def write_policy(self, source: str) -> None:
        target = self.program / "policy.py"
        tmp = target.with_name(".policy.py.tmp")
        tmp.write_text(source)
        tmp.replace(target)

    def seed_program(self, spec: dict[str, Any]) -> str:
        """The baseline source; ``program/`` gets the task's baseline if it has no policy.py."""
        policy = self.program / "policy.py"
        if not policy.is_file():
            for rel, text in spec.get("baseline_files", {}).items():
                path = Path(rel)
                if path.is_absolute() or ".." in path.parts:
                    continue
                (self.program / path).parent.mkdir(parents=True, exist_ok=True)
                (self.program / path).write_text(text)
            emit({"type": "note", "text": "program/ had no policy.py: wrote the task's baseline"})
        if not policy.is_file():
            raise AgentError("program/policy.py is missing and the task has no baseline")
        return policy.read_text()

    async def pick_task(self) -> str:
        listed = await self.call("list_tasks", {})
        tasks = listed.get("tasks", [])
        task = self.args.task or task_from_prompt(" ".join(self.args.prompt))
        if task is None:
            if listed.get("total") != 1 or len(tasks) != 1:
                raise AgentError(
                    "no task id: pass --task ID or a prompt with 'Evolve a policy for the task `ID`.'"
                )
            task = str(tasks[0]["id"])
        return task

    def make_plan(self, spec: dict[str, Any], run: dict[str, Any]) -> Plan:
        budget, left = run["budget"], run["remaining"]
        cap = min(int(budget["per_submission"]), int(budget["pool"]))
        episodes_left, submissions_left = int(left["episodes"]), int(left["submissions"])
        if self.args.episodes is not None:
            k = min(self.args.episodes, cap)
        else:  # spread the episodes evenly over every submission the run allows
            k = min(cap, episodes_left // max(1, submissions_left))
        k = max(1, min(k, episodes_left))
        affordable = min(submissions_left, episodes_left // k)
        if affordable < 1:
            raise AgentError(
                f"run {run['run_id']} has no budget left ({episodes_left} episodes, "
                f"{submissions_left} submissions)"
            )
        rounds = affordable - 1
        if self.args.rounds is not None:
            rounds = min(rounds, self.args.rounds)
        return Plan(
            selector=f"0:{k}",
            episodes=k,
            rounds=rounds,
            direction=spec["score"]["direction"],
            max_candidates=int(budget["validation_candidates"]),
        )

    def can_afford(self, plan: Plan) -> bool:
        left = self.left
        if left.get("wall_seconds") is not None and left["wall_seconds"] <= 0:
            return False
        return int(left["submissions"]) >= 1 and int(left["episodes"]) >= plan.episodes

    async def play(self) -> dict[str, Any]:
        task = await self.pick_task()
        spec = await self.describe(task)
        run = await self.call("start_run", {"task_id": task})
        self.run_id = run["run_id"]
        self.left = run["remaining"]
        baseline = self.seed_program(spec)
        family = family_for(spec["observation_space"], spec["action_space"])
        plan = self.make_plan(spec, run)
        if family is None:
            plan.rounds = 0
        emit(
            {
                "type": "plan",
                "run_id": self.run_id,
                "task": task,
                "episodes": plan.selector,
                "rounds": plan.rounds,
                "direction": plan.direction,
                "family": family.kind if family else None,
                "seed": self.args.seed,
            }
        )
        best = await self.evaluate(plan, "baseline", baseline, None)
        try:
            await self.improve(plan, family, best)
        except Rejected as exc:  # e.g. time up: finalize with what was measured
            emit({"type": "note", "text": f"stopped improving: {exc}"})
        ranked = plan.ranked()
        if not ranked:
            raise AgentError("no submission of this run has a score to hand over")
        self.write_policy(ranked[0].source)  # the workspace ends with the best program
        candidates: list[str] = []
        digests: set[str] = set()
        for t in ranked:
            if t.digest not in digests and len(candidates) < plan.max_candidates:
                digests.add(t.digest)
                candidates.append(t.submission_id)
        ack = await self.call("finalize", {"run_id": self.run_id, "candidates": candidates})
        return {
            "type": "result",
            "run_id": self.run_id,
            "task": task,
            "finalized": ack.get("state") in ("finalizing", "finalized"),
            "candidates": candidates,
            "best": {"submission_id": ranked[0].submission_id, "score": ranked[0].score},
            "baseline_score": plan.tried[0].score,
            "submissions": len(plan.tried),
        }

    async def improve(self, plan: Plan, family: Family | None, best: Tried) -> None:
        if family is None:
            return
        sigma = SIGMA_START
        for round_no in range(1, plan.rounds + 1):
            if not self.can_afford(plan):
                break
            if best.params is None:  # nothing parametric beats the incumbent yet: search
                params, how = family.draw(self.rng), "random draw"
            else:
                params, how = (
                    family.mutate(best.params, self.rng, sigma),
                    f"mutation sigma={sigma:g}",
                )
            source = family.source(params, f"Round {round_no}: {family.kind}, {how}.")
            self.write_policy(source)
            tried = await self.evaluate(plan, f"round {round_no}", source, params)
            kept = tried.score is not None and plan.key(tried) < plan.key(best)
            emit(
                {
                    "type": "compare",
                    "round": round_no,
                    "how": how,
                    "candidate": tried.submission_id,
                    "score": tried.score,
                    "best": best.submission_id,
                    "best_score": best.score,
                    "kept": kept,
                }
            )
            if kept:
                best = tried
            elif best.params is not None:
                sigma = max(SIGMA_MIN, sigma * SIGMA_DECAY)


# ------------------------------------------------------------ start-up


def load_server(path: Path, name: str) -> tuple[Launch | Remote, float]:
    """The server entry ``name`` of a Claude-Code-shaped MCP config (a stdio command, or
    an HTTP URL with an ``Authorization`` header), and its timeout (s)."""
    try:
        config = json.loads(path.read_text())
        entry = config["mcpServers"][name]
    except OSError as exc:
        raise AgentError(f"cannot read --mcp-config {path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError):
        raise AgentError(f"--mcp-config {path} has no mcpServers.{name} entry") from None
    if not isinstance(entry, dict) or entry.get("type", "stdio") not in ("stdio", "http"):
        raise AgentError(f"mcpServers.{name} in {path}: only stdio and http servers are supported")
    timeout = float(entry.get("timeout") or 600_000) / 1000
    if entry.get("type") == "http":
        auth = str((entry.get("headers") or {}).get("Authorization", ""))
        if not isinstance(entry.get("url"), str):
            raise AgentError(f"mcpServers.{name} in {path} has no url")
        return Remote(entry["url"], auth.removeprefix("Bearer ")), timeout
    if not isinstance(entry.get("command"), str):
        raise AgentError(f"mcpServers.{name} in {path} has no command")
    env = {str(k): str(v) for k, v in (entry.get("env") or {}).items()}
    return Launch(entry["command"], tuple(str(a) for a in entry.get("args") or []), env), timeout


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=f"python -m evopolicy_mcp.agents.{PROG}",
        description="An LLM-free agent: improve-and-compare on matched pool indices over MCP.",
    )
    parser.add_argument("--mcp-config", required=True, type=Path, help="Claude-style MCP config")
    parser.add_argument("--server", default="evopolicy", help="server entry in the config")
    parser.add_argument("--task", default=None, help="task id (default: from the prompt)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the search (default 0)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="most candidates after the baseline (default: as many as fit)",
    )
    parser.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="pool indices per comparison (default: budget / submissions)",
    )
    parser.add_argument(
        "--server-log",
        type=Path,
        default=Path(os.devnull),
        help="where the server's stderr goes (default: discarded)",
    )
    parser.add_argument("prompt", nargs="*", help="the task prompt (read only for the task id)")
    args = parser.parse_args(argv)
    if args.rounds is not None and args.rounds < 0:
        parser.error("--rounds must be >= 0")
    if args.episodes is not None and args.episodes < 1:
        parser.error("--episodes must be >= 1")
    return args


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    workspace = Path.cwd()
    server, timeout = load_server(args.mcp_config, args.server)
    with open(args.server_log, "a") as errlog:
        # The launcher already gave this process a minimal environment; pass it on.
        connection = transport(server, dict(os.environ), errlog)
        async with Client(connection, read_timeout_seconds=timeout) as client:
            agent = Agent(client, args, workspace)
            try:
                return await agent.play()
            except AgentError as exc:
                exc.run_id = exc.run_id or agent.run_id
                raise


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    emit({"type": "start", "agent": PROG, "server": args.server, "seed": args.seed})
    try:
        emit(anyio.run(_main, args))
        return 0
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one line, never a traceback
        leaf = _leaf(exc)
        known = isinstance(leaf, AgentError)
        run_id = leaf.run_id if isinstance(leaf, AgentError) else None
        reason = leaf.message if isinstance(leaf, AgentError) else f"{type(leaf).__name__}: {leaf}"
        reason = " ".join(reason.split()) or type(leaf).__name__
        if not known:
            reason = f"the MCP session failed: {reason}"
        emit({"type": "result", "run_id": run_id, "finalized": False, "error": reason})
        print(f"{PROG}: {reason}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
