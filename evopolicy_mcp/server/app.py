"""The MCP surface over a :class:`~evopolicy_mcp.host.authority.Host`: tools, resources, a prompt,
and the ``serve`` entry point (stdio, or streamable HTTP on 127.0.0.1).

This module only translates: validated arguments in, a ``views`` model or a
``ToolError`` carrying ``HostError.message`` out. Every rule (budgets,
admission, finalize, what is public) lives in the host; bridge.py moves calls
between the event loop and the host's threads.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable
from functools import partial
from importlib.metadata import version
from typing import Annotated, Any, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, ToolAnnotations
from pydantic import BaseModel, Field

from evopolicy_mcp.host import guide
from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.host.views import (
    FinalizeAck,
    RunInfo,
    RunStatus,
    SubmissionView,
    TaskInfo,
    TaskSpec,
)
from evopolicy_mcp.server.bridge import (
    HostSlot,
    Progress,
    admit,
    all_pages,
    host_call,
    resource_call,
    running_hint,
)

__all__ = ["build_server"]

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])

WAIT_MAX = 50.0  # stays under the 60 s tool-call timeout some clients apply by default
_WAIT_SLICE = 2.0  # get_feedback reports progress at least this often while it waits
_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

TaskId = Annotated[str, Field(description="a task id from list_tasks, e.g. 'cartpole'")]
RunId = Annotated[str, Field(description="the run_id returned by start_run")]
SubmissionId = Annotated[str, Field(description="a submission_id returned by submit_policy")]


def flat_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The same output schema with every ``$ref`` inlined and ``X | None`` as a type list.

    Clients validate each result against it; reference lookups and ``anyOf``
    branches made the SDK's own client spend ~30 ms on a 100-submission
    ``run_status``. The schemas describe the same documents either way.
    """
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target = walk(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {**target, **{k: walk(v) for k, v in node.items() if k != "$ref"}}
        out = {k: walk(v) for k, v in node.items() if k != "$defs"}
        branches = out.get("anyOf")
        if isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches:
            other = branches[0] if branches[1] == {"type": "null"} else branches[1]
            if isinstance(other.get("type"), str):
                del out["anyOf"]
                out = {**other, **out, "type": [other["type"], "null"]}
        return out

    return walk(schema)


def build_server(host: Host | Callable[[], Host]) -> MCPServer:
    """The MCP server over ``host`` (an open Host, or a factory called on connect)."""
    slot = HostSlot(host)
    mcp = MCPServer(
        "evopolicy",
        title="evopolicy: evolve executable policies",
        instructions=guide.SERVER_INSTRUCTIONS,
        version=version("evopolicy-mcp"),
        lifespan=slot.lifespan,
    )

    def tool(annotations: ToolAnnotations) -> Callable[[F], F]:
        # Dedented: the docstring is the text the agent reads.
        def register(fn: F) -> F:
            mcp.add_tool(
                fn, description=inspect.cleandoc(fn.__doc__ or ""), annotations=annotations
            )
            registered = mcp._tool_manager.get_tool(fn.__name__)
            if registered is not None and registered.fn_metadata.output_schema is not None:
                registered.fn_metadata.output_schema = flat_schema(
                    registered.fn_metadata.output_schema
                )
            return fn

        return register

    async def wait_for(ctx: Context, run_id: str, submission_id: str, seconds: float) -> None:
        progress = Progress(ctx)
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            timeout = min(_WAIT_SLICE, left)
            view = await host_call(
                "get_feedback",
                partial(slot.host.wait, run_id, submission_id, timeout),
                abandon=True,
            )
            if view.status != "running":
                return
            await progress.report(view.episodes_done, view.indices_total)

    @tool(_READ_ONLY)
    async def list_tasks() -> list[TaskInfo]:
        """List the tasks this server offers: id, title, one-line summary and budget of each.

        Costs nothing."""
        return await host_call("list_tasks", slot.host.list_tasks)

    @tool(_READ_ONLY)
    async def describe_task(task_id: TaskId) -> TaskSpec:
        """The full public spec of a task: description, observation and action spaces with
        their meanings, parameters, scoring, budget, limits, rules, the policy ABI and the
        baseline program (baseline_files: relative path -> source; start from it).

        Costs nothing."""
        return await host_call("describe_task", lambda: slot.host.describe_task(task_id))

    @tool(ToolAnnotations(read_only_hint=False, open_world_hint=False))
    async def start_run(task_id: TaskId) -> RunInfo:
        """Start a run on a task and get its run_id, budget, pool size and rules.

        The task fixes the budget (episodes, submissions, episodes per submission, pool
        size, maybe wall time); it cannot be changed. Costs nothing from any budget, but the
        operator may cap how many runs a server starts, or bind the server to one run (then
        this returns that run). Keep the run_id for every later call."""
        return await host_call("start_run", lambda: slot.host.start_run(task_id))

    @tool(ToolAnnotations(read_only_hint=False, open_world_hint=False))
    async def submit_policy(
        run_id: RunId,
        episodes: Annotated[
            str,
            Field(
                description=(
                    "training-pool indices to evaluate on: comma-separated indices and "
                    "half-open ranges, strictly increasing, e.g. '0:4' or '0:2,5,8:10' "
                    "(= 0,1,5,8,9). Reusing an index replays the same hidden episode."
                )
            ),
        ],
        ctx: Context,
        files: Annotated[
            dict[str, str] | None,
            Field(
                description=(
                    "the program inline: relative path -> file text, with policy.py at the "
                    "top. Give either files or program_dir."
                )
            ),
        ] = None,
        program_dir: Annotated[
            str | None,
            Field(description="absolute path of a local directory holding policy.py"),
        ] = None,
        wait_seconds: Annotated[
            float,
            Field(
                ge=0,
                le=WAIT_MAX,
                description=(
                    "how long to wait for the result before returning status 'running' "
                    "(evaluation continues in the background either way)"
                ),
            ),
        ] = 45.0,
    ) -> SubmissionView:
        """Submit a program and evaluate it on chosen training-pool episodes.

        Cost: once admitted, the submission is charged len(selected indices) episodes and
        one submission, reserved atomically; it stays charged whatever the program does
        (a crash or timeout is a scored policy failure). A rejected call (bad selector,
        index out of the pool, over budget, over the per-submission cap, no submissions
        left, run closed, time up) and a program that fails to capture (missing policy.py,
        too large, bad path) cost nothing. Reusing an index replays the same hidden episode,
        so two programs on the same indices are a matched comparison; it is charged again.

        Sends progress notifications as episodes finish. Waits up to wait_seconds, then
        returns the complete feedback, or status 'running' with the submission_id: call
        get_feedback(run_id, submission_id, wait_seconds=45) for the rest. The program is
        snapshotted at admission; later edits do not change this submission."""
        progress = Progress(ctx)
        async with progress.pumping():
            outcome = await _submit_and_wait(
                slot.host, run_id, episodes, files, program_dir, wait_seconds, progress
            )
        # Raised here, not inside the pump's task group, which would wrap it in a group.
        if isinstance(outcome, ToolError):
            raise outcome
        view = outcome
        if view.status != "running":
            await progress.report(view.indices_total, view.indices_total, view.status)
        return running_hint(view)

    @tool(_READ_ONLY)
    async def get_feedback(
        run_id: RunId,
        submission_id: SubmissionId,
        ctx: Context,
        episode: Annotated[
            int | None,
            Field(ge=0, description="a pool index: show only that episode, with its trace"),
        ] = None,
        wait_seconds: Annotated[
            float,
            Field(ge=0, le=WAIT_MAX, description="wait up to this long while it is running"),
        ] = 0.0,
        offset: Annotated[int, Field(ge=0, description="first episode summary to show")] = 0,
        limit: Annotated[int, Field(ge=1, le=200, description="most episode summaries")] = 50,
    ) -> SubmissionView:
        """Feedback of a submission: status, score, per-episode summaries (status, return,
        steps, failure code, traceback and stderr excerpts), task metrics and step traces.

        Costs nothing. With wait_seconds > 0 it waits while the submission is running and
        sends progress notifications. Long feedback is paged: when next_offset is set,
        call again with offset=next_offset. episode=N shows one pool index in full."""
        if wait_seconds > 0:
            await wait_for(ctx, run_id, submission_id, wait_seconds)
        view = await host_call(
            "get_feedback",
            lambda: slot.host.feedback(
                run_id, submission_id, episode=episode, offset=offset, limit=limit
            ),
        )
        return running_hint(view)

    @tool(_READ_ONLY)
    async def run_status(run_id: RunId) -> RunStatus:
        """Budget and state of a run: episodes and submissions used and remaining, wall time
        left, each submission with its public score and state, whether the run is open.

        Costs nothing."""
        return await host_call("run_status", lambda: slot.host.run_status(run_id))

    @tool(ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def finalize(
        run_id: RunId,
        candidates: Annotated[
            list[str],
            Field(
                min_length=1,
                description="submission ids of your best programs, best first (a few)",
            ),
        ],
    ) -> FinalizeAck:
        """Hand over your candidates and close the run. Irreversible.

        After this no call can submit to the run. Submissions still running finish first
        (their feedback stays readable); then the host evaluates every candidate on the
        same hidden validation episodes, selects the best score (then fewer policy failures,
        then your order) and measures the selected program on held-out episodes. You get an
        acknowledgement only: those scores are never returned. Unknown or duplicate ids, or
        more candidates than the task allows, are rejected and leave the run open. Costs no
        episodes."""
        return await host_call(
            "finalize",
            lambda: slot.host.finalize(run_id, list(candidates)),
            fault="call run_status to see whether the run was closed",
        )

    _add_resources(mcp, slot)

    @mcp.prompt(title="Evolve a policy for a task")
    async def evolve_policy(task_id: str) -> str:
        """Working instructions for evolving a policy on a task with this server."""
        try:
            spec = await resource_call(lambda: slot.host.describe_task(task_id))
        except ResourceError as exc:  # a JSON-RPC error carries its message to the client
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        return guide.evolve_policy_prompt(task_id, spec.summary, guide.budget_line(spec.budget))

    return mcp


async def _submit_and_wait(
    host: Host,
    run_id: str,
    episodes: str,
    files: dict[str, str] | None,
    program_dir: str | None,
    wait_seconds: float,
    progress: Progress,
) -> SubmissionView | ToolError:
    try:
        submission_id = await admit(host, run_id, episodes, files, program_dir, progress)
        return await host_call(
            "submit_policy (waiting for the evaluation)",
            lambda: host.wait(run_id, submission_id, wait_seconds),
            fault=(
                f"submission {submission_id} was admitted and is charged; call "
                f"get_feedback(run_id={run_id!r}, submission_id={submission_id!r})"
            ),
            abandon=True,
        )
    except ToolError as exc:
        return exc


def _json(model: BaseModel) -> str:
    return model.model_dump_json(indent=2)


def _add_resources(mcp: MCPServer, slot: HostSlot) -> None:
    @mcp.resource("evopolicy://abi", title="The policy ABI", mime_type="text/markdown")
    def abi() -> str:
        """How a policy program is laid out and run: make_policy(context) and act(observation)."""
        return guide.ABI_GUIDE

    @mcp.resource(
        "evopolicy://instructions", title="How to evolve a policy", mime_type="text/markdown"
    )
    def instructions() -> str:
        """Working instructions: edit, submit on few episodes, compare on matched indices."""
        return guide.WORKING_INSTRUCTIONS

    @mcp.resource("evopolicy://tasks/{task_id}", title="Task spec", mime_type="application/json")
    async def task_spec(task_id: str) -> str:
        """The public spec of a task, as describe_task returns it."""
        return _json(await resource_call(lambda: slot.host.describe_task(task_id)))

    @mcp.resource(
        "evopolicy://runs/{run_id}/submissions/{submission_id}/feedback",
        title="Submission feedback",
        mime_type="application/json",
    )
    async def feedback(run_id: str, submission_id: str) -> str:
        """All feedback of a submission in one document (every episode summary)."""
        return _json(await resource_call(lambda: all_pages(slot.host, run_id, submission_id)))

    @mcp.resource(
        "evopolicy://runs/{run_id}/submissions/{submission_id}/episodes/{episode}",
        title="Episode artifacts",
        mime_type="application/json",
    )
    async def episode_artifacts(run_id: str, submission_id: str, episode: str) -> str:
        """One pool index of a submission in full: summary, traceback, stderr and step trace."""
        if not episode.isdigit():
            raise ResourceError(f"episode must be a pool index (an integer), not {episode!r}")
        view = await resource_call(
            lambda: slot.host.feedback(run_id, submission_id, episode=int(episode))
        )
        return _json(view)

    @mcp.resource(
        "evopolicy://runs/{run_id}/submissions/{submission_id}/episodes/{episode}/files/{name}",
        title="Episode file",
    )
    async def episode_file(run_id: str, submission_id: str, episode: str, name: str) -> bytes:
        """A file saved for a traced training episode: e.g. trajectory.jsonl.gz or replay.gif
        (the names are in the episode's traces[].artifacts)."""
        if not episode.isdigit():
            raise ResourceError(f"episode must be a pool index (an integer), not {episode!r}")
        return await resource_call(
            lambda: slot.host.artifact(run_id, submission_id, int(episode), name)
        )
