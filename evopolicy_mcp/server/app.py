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
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, ToolAnnotations
from pydantic import Field

from evopolicy_mcp.host import guide
from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.host.pages import RESULT_CHARS, compact_text
from evopolicy_mcp.host.views import (
    FinalizeAck,
    RunInfo,
    RunStatus,
    SubmissionView,
    TaskList,
    TaskSpec,
)
from evopolicy_mcp.server.bridge import (
    HostSlot,
    Progress,
    admit,
    all_pages,
    client_of,
    host_call,
    resource_call,
)
from evopolicy_mcp.server.echoes import BoundedEchoes
from evopolicy_mcp.server.results import (
    FILE_MIME,
    EvopolicyServer,
    agent_result,
)
from evopolicy_mcp.server.schemas import lean_schema

__all__ = ["build_server"]

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])

WAIT_MAX = 50.0  # stays under the 60 s tool-call timeout some clients apply by default
_WAIT_SLICE = 2.0  # get_feedback reports progress at least this often while it waits
_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

TaskId = Annotated[
    str, Field(description="a task id from list_tasks, e.g. 'cartpole' or 'minigrid/doorkey-8x8'")
]
RunId = Annotated[str, Field(description="the run_id returned by start_run")]
SubmissionId = Annotated[str, Field(description="a submission_id returned by submit_policy")]


def build_server(host: Host | Callable[[], Host]) -> MCPServer:
    """The MCP server over ``host`` (an open Host, or a factory called on connect)."""
    slot = HostSlot(host)
    mcp = EvopolicyServer(
        "evopolicy",
        title="evopolicy: evolve executable policies",
        instructions=guide.SERVER_INSTRUCTIONS,
        version=version("evopolicy-mcp"),
        lifespan=slot.lifespan,
        middleware=[BoundedEchoes()],  # no error repeats much of what the agent sent
    )

    def tool(annotations: ToolAnnotations) -> Callable[[F], F]:
        # Dedented: the docstring is the text the agent reads.
        def register(fn: F) -> F:
            mcp.add_tool(
                fn, description=inspect.cleandoc(fn.__doc__ or ""), annotations=annotations
            )
            registered = mcp._tool_manager.get_tool(fn.__name__)
            if registered is not None:
                registered.parameters = lean_schema(registered.parameters)
                meta = registered.fn_metadata
                if meta.output_schema is not None:
                    meta.output_schema = lean_schema(meta.output_schema, output=True)
            return fn

        return register

    async def wait_for(ctx: Context, run_id: str, submission_id: str, seconds: float) -> None:
        progress = Progress(ctx)
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            timeout = min(_WAIT_SLICE, left)
            view = await host_call(
                "get_feedback",
                partial(slot.host.wait, run_id, submission_id, timeout, client=client_of(ctx)),
                abandon=True,
            )
            if view.status != "running":
                return
            await progress.report(view.episodes_done, view.indices_total)

    @tool(_READ_ONLY)
    async def list_tasks(
        ctx: Context,
        family: Annotated[
            str | None,
            Field(description="only the tasks of this family, e.g. 'minigrid' (default: all)"),
        ] = None,
        offset: Annotated[int, Field(ge=0, description="first task to list (see hint)")] = 0,
    ) -> Annotated[CallToolResult, TaskList]:
        """List the tasks: first each family with its task count, then id, family, title,
        one-line summary and budget of each task, and whether this server has its
        environment installed (available). Many tasks come in pages: when next_offset is
        set, call again with offset=next_offset, or list one family. Costs nothing."""
        client = client_of(ctx)
        return agent_result(
            await host_call(
                "list_tasks",
                lambda: slot.host.task_list(
                    family, offset=offset, max_chars=RESULT_CHARS, client=client
                ),
            )
        )

    @tool(_READ_ONLY)
    async def describe_task(
        task_id: TaskId,
        ctx: Context,
        page: Annotated[int, Field(ge=1, description="page of a long spec (see hint)")] = 1,
    ) -> Annotated[CallToolResult, TaskSpec]:
        """A task's public spec: description, observation and action spaces with their
        meanings, scoring, budget, limits, then the baseline program (baseline_files: path ->
        source; start from it), the policy ABI, the rules, metrics and metadata. A long spec
        comes in pages: when pages > 1, read the next with page=N. Costs nothing."""
        return agent_result(
            await host_call(
                "describe_task",
                lambda: slot.host.describe_task(
                    task_id, page=page, max_chars=RESULT_CHARS, client=client_of(ctx)
                ),
            )
        )

    @tool(ToolAnnotations(read_only_hint=False, open_world_hint=False))
    async def start_run(task_id: TaskId, ctx: Context) -> Annotated[CallToolResult, RunInfo]:
        """Start a run on a task: its run_id, budget, pool size and rules. Keep the run_id.

        The task fixes the budget (episodes, submissions, episodes per submission, pool, maybe
        wall time). Costs nothing; the operator may cap the runs a server starts, or bind it
        to one run (then this returns that run)."""
        client = client_of(ctx)
        return agent_result(
            await host_call("start_run", lambda: slot.host.start_run(task_id, client=client))
        )

    @tool(ToolAnnotations(read_only_hint=False, open_world_hint=False))
    async def submit_policy(
        run_id: RunId,
        episodes: Annotated[
            str,
            Field(
                description=(
                    "training-pool indices: indices and half-open ranges, strictly "
                    "increasing, e.g. '0:4' or '0:2,5,8:10' (= 0,1,5,8,9)"
                )
            ),
        ],
        ctx: Context,
        files: Annotated[
            dict[str, str] | None,
            Field(description="the program inline: relative path -> text, policy.py at the top"),
        ] = None,
        program_dir: Annotated[
            str | None,
            Field(description="or: absolute path of a local directory holding policy.py"),
        ] = None,
        wait_seconds: Annotated[
            float,
            Field(ge=0, le=WAIT_MAX, description="wait this long for the result, then 'running'"),
        ] = 45.0,
    ) -> Annotated[CallToolResult, SubmissionView]:
        """Evaluate a program on chosen training-pool episodes.

        Cost: once admitted, len(selected indices) episodes and one submission, reserved
        atomically, whatever the program does (a crash or timeout is a scored policy
        failure). A rejected call and a program that fails to capture (missing policy.py,
        too large, bad path) cost nothing. Reusing an index replays the same hidden episode
        (a matched comparison) and is charged again.

        Sends progress notifications; after wait_seconds returns the feedback, or status
        'running': then get_feedback(run_id, submission_id, wait_seconds=45). The program is
        snapshotted at admission."""
        progress = Progress(ctx)
        async with progress.pumping():
            outcome = await _submit_and_wait(
                slot.host,
                run_id,
                episodes,
                files,
                program_dir,
                wait_seconds,
                progress,
                client_of(ctx),
            )
        # Raised here, not inside the pump's task group, which would wrap it in a group.
        if isinstance(outcome, ToolError):
            raise outcome
        view = outcome
        if view.status != "running":
            await progress.report(view.indices_total, view.indices_total, view.status)
        return agent_result(view)

    @tool(_READ_ONLY)
    async def get_feedback(
        run_id: RunId,
        submission_id: SubmissionId,
        ctx: Context,
        episode: Annotated[
            int | None,
            Field(ge=0, description="a pool index: that episode in full, with its step trace"),
        ] = None,
        wait_seconds: Annotated[
            float, Field(ge=0, le=WAIT_MAX, description="wait up to this long while running")
        ] = 0.0,
        offset: Annotated[
            int, Field(ge=0, description="first episode summary (with episode: first trace step)")
        ] = 0,
        limit: Annotated[int, Field(ge=1, le=200, description="most episode summaries")] = 50,
    ) -> Annotated[CallToolResult, SubmissionView]:
        """Feedback of a submission: status, score, per-episode summaries (return, steps,
        failure code, traceback and stderr excerpts, metrics), task metrics; episode=N adds
        that episode's report and step trace.

        Costs nothing. wait_seconds > 0 waits while it runs, with progress notifications.
        Long feedback is paged: when next_offset is set, call again with offset=next_offset
        (the hint says so). Fields at their default (null, false, 0, empty) are left out,
        and so are a page's per-episode metrics equal to 0."""
        if wait_seconds > 0:
            await wait_for(ctx, run_id, submission_id, wait_seconds)
        client = client_of(ctx)
        view = await host_call(
            "get_feedback",
            lambda: slot.host.feedback(
                run_id,
                submission_id,
                episode=episode,
                offset=offset,
                limit=limit,
                max_chars=RESULT_CHARS,
                client=client,
            ),
        )
        return agent_result(view)

    @tool(_READ_ONLY)
    async def run_status(
        run_id: RunId,
        ctx: Context,
        offset: Annotated[int, Field(ge=0, description="first submission to list")] = 0,
    ) -> Annotated[CallToolResult, RunStatus]:
        """Budget and state of a run: episodes and submissions used and remaining, wall time
        left, each submission's public score and state, whether the run is open. Costs
        nothing."""
        return agent_result(
            await host_call(
                "run_status",
                lambda: slot.host.run_status(
                    run_id, offset=offset, max_chars=RESULT_CHARS, client=client_of(ctx)
                ),
            )
        )

    @tool(ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def finalize(
        run_id: RunId,
        candidates: Annotated[
            list[str],
            Field(min_length=1, description="submission ids of your best programs, best first"),
        ],
        ctx: Context,
    ) -> Annotated[CallToolResult, FinalizeAck]:
        """Hand over your candidates and close the run. Irreversible; costs no episodes.

        No call can submit to the run after this. Submissions still running finish first
        (their feedback stays readable); then the host evaluates every candidate on the
        same hidden validation episodes, selects the best score (then fewer policy failures,
        then your order) and measures it on held-out episodes; those scores are never
        returned. Unknown or duplicate ids, or more candidates than the task allows, are
        rejected and leave the run open."""
        client = client_of(ctx)
        return agent_result(
            await host_call(
                "finalize",
                lambda: slot.host.finalize(run_id, list(candidates), client=client),
                fault="call run_status to see whether the run was closed",
            )
        )

    _add_resources(mcp, slot)

    @mcp.prompt(title="Evolve a policy for a task")
    async def evolve_policy(task_id: str, ctx: Context) -> str:
        """Working instructions for evolving a policy on a task with this server."""
        client = client_of(ctx)
        try:
            info = await resource_call(lambda: slot.host.task_info(task_id, client=client))
        except ResourceError as exc:  # a JSON-RPC error carries its message to the client
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        return guide.evolve_policy_prompt(task_id, info.summary, guide.budget_line(info.budget))

    return mcp


async def _submit_and_wait(
    host: Host,
    run_id: str,
    episodes: str,
    files: dict[str, str] | None,
    program_dir: str | None,
    wait_seconds: float,
    progress: Progress,
    client: str | None,
) -> SubmissionView | ToolError:
    try:
        submission_id = await admit(host, run_id, episodes, files, program_dir, progress, client)
        return await host_call(
            "submit_policy (waiting for the evaluation)",
            lambda: host.wait(
                run_id, submission_id, wait_seconds, max_chars=RESULT_CHARS, client=client
            ),
            fault=(
                f"submission {submission_id} was admitted and is charged; call "
                f"get_feedback(run_id={run_id!r}, submission_id={submission_id!r})"
            ),
            abandon=True,
        )
    except ToolError as exc:
        return exc


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

    @mcp.resource("evopolicy://tasks/{+task_id}", title="Task spec", mime_type="application/json")
    async def task_spec(task_id: str, ctx: Context) -> str:
        """The public spec of a task, as describe_task returns it."""
        client = client_of(ctx)
        spec = await resource_call(lambda: slot.host.describe_task(task_id, client=client))
        return compact_text(spec)

    @mcp.resource(
        "evopolicy://runs/{run_id}/submissions/{submission_id}/feedback",
        title="Submission feedback",
        mime_type="application/json",
    )
    async def feedback(run_id: str, submission_id: str, ctx: Context) -> str:
        """All feedback of a submission in one document (every episode summary)."""
        client = client_of(ctx)
        return compact_text(
            await resource_call(lambda: all_pages(slot.host, run_id, submission_id, client))
        )

    @mcp.resource(
        "evopolicy://runs/{run_id}/submissions/{submission_id}/episodes/{episode}",
        title="Episode artifacts",
        mime_type="application/json",
    )
    async def episode_artifacts(run_id: str, submission_id: str, episode: str, ctx: Context) -> str:
        """One pool index of a submission in full: summary, traceback, stderr and step trace."""
        if not episode.isdigit():
            raise ResourceNotFoundError(
                f"episode must be a pool index (an integer), not {episode!r}"
            )
        client = client_of(ctx)
        view = await resource_call(
            lambda: slot.host.feedback(run_id, submission_id, episode=int(episode), client=client)
        )
        return compact_text(view)

    @mcp.resource(
        "evopolicy://runs/{run_id}/submissions/{submission_id}/episodes/{episode}/files/{name}",
        title="Episode file",
        mime_type=FILE_MIME,  # each file read carries its own type (results.file_mime)
    )
    async def episode_file(
        run_id: str, submission_id: str, episode: str, name: str, ctx: Context
    ) -> bytes:
        """A file saved for a traced training episode: e.g. trajectory.jsonl.gz or replay.gif
        (the names are in the episode's traces[].artifacts)."""
        if not episode.isdigit():
            raise ResourceNotFoundError(
                f"episode must be a pool index (an integer), not {episode!r}"
            )
        client = client_of(ctx)
        return await resource_call(
            lambda: slot.host.artifact(run_id, submission_id, int(episode), name, client=client)
        )
