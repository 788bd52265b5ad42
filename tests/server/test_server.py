"""The MCP surface, driven in-process through the SDK's Client over a real Host:
real SQLite records, real policy processes, real CartPole episodes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.server.app import build_server
from tests.support.server import (
    BASELINE_FILES,
    CRASHING_FILES,
    MINI,
    PD_FILES,
    call,
    call_error,
    error_text,
    slow_files,
    submit,
    usage,
)

pytestmark = pytest.mark.anyio

TOOLS = {
    "list_tasks",
    "describe_task",
    "start_run",
    "submit_policy",
    "get_feedback",
    "run_status",
    "finalize",
}
READ_ONLY = {"list_tasks", "describe_task", "get_feedback", "run_status"}


async def test_tools_are_listed_with_output_schemas_and_hints(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        assert tool.output_schema is not None, name
        assert tool.description and "cost" in tool.description.lower(), name
        assert tool.annotations is not None
        assert bool(tool.annotations.read_only_hint) == (name in READ_ONLY), name
    submit = tools["submit_policy"]
    props = submit.input_schema["properties"]
    assert {"run_id", "episodes", "files", "program_dir", "wait_seconds"} <= set(props)
    assert "ctx" not in props
    assert props["wait_seconds"]["maximum"] <= 50
    assert "len(selected indices)" in (submit.description or "")


async def test_a_submission_returns_complete_feedback_and_is_charged_once(
    client: Client,
) -> None:
    run = await call(client, "start_run", task_id=MINI)
    view = await submit(client, run["run_id"], "0:4", PD_FILES)
    assert view["status"] == "complete"
    assert view["score"] == 500.0
    assert [e["index"] for e in view["episode_summaries"]] == [0, 1, 2, 3]
    assert view["remaining"] == {"episodes": 8, "submissions": 5}  # no null: no time limit
    assert await usage(client, run["run_id"]) == (4, 1)


async def test_policy_failures_come_back_with_a_traceback(client: Client) -> None:
    run = await call(client, "start_run", task_id=MINI)
    view = await submit(client, run["run_id"], "0:2", CRASHING_FILES)
    assert view["status"] == "complete"
    assert view["policy_failures"] == 2 and view["failures"] == {"exception": 2}
    episode = view["episode_summaries"][0]
    assert episode["failure"] == "exception"
    assert "deliberate crash after three steps" in episode["traceback"]


async def test_wait_zero_returns_running_then_get_feedback_completes(client: Client) -> None:
    run = await call(client, "start_run", task_id=MINI)
    first = await call(
        client,
        "submit_policy",
        run_id=run["run_id"],
        episodes="0:2",
        files=slow_files(0.5),
        wait_seconds=0,
    )
    assert first["status"] == "running"
    assert "get_feedback" in first["hint"] and first["submission_id"] in first["hint"]
    done = await call(
        client,
        "get_feedback",
        run_id=run["run_id"],
        submission_id=first["submission_id"],
        wait_seconds=30,
    )
    assert done["status"] == "complete" and done["episodes_done"] == 2
    assert done["score"] == 500.0


async def test_progress_notifications_arrive_for_each_evaluation(client: Client) -> None:
    run = await call(client, "start_run", task_id=MINI)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    result = await client.call_tool(
        "submit_policy",
        {"run_id": run["run_id"], "episodes": "0:4", "files": slow_files(0.2)},
        progress_callback=on_progress,
    )
    assert not result.is_error, error_text(result)
    assert seen, "no progress notification arrived"
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)
    assert seen[-1][:2] == (4, 4)
    assert all(total == 4 and msg and "episodes evaluated" in msg for _, total, msg in seen)


async def test_get_feedback_waiting_reports_progress(client: Client) -> None:
    run = await call(client, "start_run", task_id=MINI)
    first = await call(
        client,
        "submit_policy",
        run_id=run["run_id"],
        episodes="0:4",
        files=slow_files(1.2),
        wait_seconds=0,
    )
    seen: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        seen.append(done)

    result = await client.call_tool(
        "get_feedback",
        {"run_id": run["run_id"], "submission_id": first["submission_id"], "wait_seconds": 30},
        progress_callback=on_progress,
    )
    assert not result.is_error and result.structured_content["status"] == "complete"
    assert seen, "waiting in get_feedback sent no progress"


async def test_long_feedback_is_paged_with_an_offset_hint(client: Client) -> None:
    run = await call(client, "start_run", task_id=MINI)
    view = await submit(client, run["run_id"], "0:4", BASELINE_FILES)
    rid, sid = run["run_id"], view["submission_id"]
    page = await call(client, "get_feedback", run_id=rid, submission_id=sid, limit=3)
    assert [e["index"] for e in page["episode_summaries"]] == [0, 1, 2]
    assert page["next_offset"] == 3 and "offset=3" in page["hint"]
    rest = await call(client, "get_feedback", run_id=rid, submission_id=sid, offset=3, limit=3)
    assert [e["index"] for e in rest["episode_summaries"]] == [3]
    assert "next_offset" not in rest  # a null is left out
    one = await call(client, "get_feedback", run_id=rid, submission_id=sid, episode=2)
    assert [e["index"] for e in one["episode_summaries"]] == [2]


async def test_matched_indices_replay_the_same_hidden_episodes(client: Client) -> None:
    run = await call(client, "start_run", task_id=MINI)
    a = await submit(client, run["run_id"], "0:3", BASELINE_FILES)
    b = await submit(client, run["run_id"], "0:3", BASELINE_FILES)
    returns = [[e["episode_return"] for e in v["episode_summaries"]] for v in (a, b)]
    assert returns[0] == returns[1]
    assert await usage(client, run["run_id"]) == (6, 2)


async def test_finalize_acknowledges_without_any_score(client: Client, host: Host) -> None:
    run = await call(client, "start_run", task_id=MINI)
    a = await submit(client, run["run_id"], "0:2", PD_FILES)
    b = await submit(client, run["run_id"], "0:2", BASELINE_FILES)
    ack = await call(
        client,
        "finalize",
        run_id=run["run_id"],
        candidates=[a["submission_id"], b["submission_id"]],
    )
    assert ack["candidates"] == [a["submission_id"], b["submission_id"]]
    assert ack["state"] in ("finalizing", "finalized")
    assert "No scores are returned" in ack["message"]
    assert "score" not in json.dumps(ack).replace("No scores are returned", "")
    await anyio.to_thread.run_sync(host.wait_final, run["run_id"], 60)
    status = await call(client, "run_status", run_id=run["run_id"])
    assert status["state"] == "finalized" and status["open"] is False
    assert "validation" not in json.dumps(status) and "assessment" not in json.dumps(status)


# ---------------------------------------------------------------- host faults


class _FaultyHost(Host):
    fault: str = ""

    def run_status(self, run_id: str, **kwargs):  # type: ignore[no-untyped-def]
        if self.fault == "status":
            raise RuntimeError("disk on fire /secret/path")
        return super().run_status(run_id, **kwargs)

    def submit(self, run_id: str, episodes: str, **kwargs: Any) -> str:
        if self.fault == "before_charge":
            raise RuntimeError("store unavailable /secret/path")
        sid = super().submit(run_id, episodes, **kwargs)
        if self.fault == "after_charge":
            raise RuntimeError("lost the reply /secret/path")
        return sid


async def test_a_host_fault_is_reported_honestly_and_the_server_keeps_serving(
    tmp_path: Path, tasks_dir: Path
) -> None:
    with _FaultyHost(tmp_path / "data", tasks_dirs=[tasks_dir]) as host:
        async with Client(build_server(host)) as c:
            run = await call(c, "start_run", task_id=MINI)
            rid = run["run_id"]

            host.fault = "status"
            message = await call_error(c, "run_status", run_id=rid)
            assert "host fault" in message and "nothing was charged" in message
            assert "/secret/path" not in message

            host.fault = "before_charge"
            message = await call_error(c, "submit_policy", run_id=rid, episodes="0", files=PD_FILES)
            assert "host fault" in message and "nothing was charged" in message
            assert "/secret/path" not in message

            host.fault = "after_charge"
            message = await call_error(c, "submit_policy", run_id=rid, episodes="0", files=PD_FILES)
            assert "host fault" in message and "nothing was charged" not in message
            assert "run_status" in message

            host.fault = ""
            status = await call(c, "run_status", run_id=rid)
            assert status["submissions_used"] == 1  # the one admitted before the fault


# ---------------------------------------------------------------- resources and prompt


async def test_resources_and_the_prompt_are_readable(client: Client) -> None:
    templates = {
        t.uri_template for t in (await client.list_resource_templates()).resource_templates
    }
    assert {
        "evopolicy://tasks/{+task_id}",  # + : a family id has a slash (minigrid/doorkey-8x8)
        "evopolicy://runs/{run_id}/submissions/{submission_id}/feedback",
        "evopolicy://runs/{run_id}/submissions/{submission_id}/episodes/{episode}",
    } <= templates
    abi = (await client.read_resource("evopolicy://abi")).contents[0].text
    assert "make_policy(context)" in abi and "act(observation)" in abi
    spec = json.loads((await client.read_resource(f"evopolicy://tasks/{MINI}")).contents[0].text)
    assert spec["id"] == MINI and "policy.py" in spec["baseline_files"]

    run = await call(client, "start_run", task_id=MINI)
    view = await submit(client, run["run_id"], "0:2", PD_FILES)
    base = f"evopolicy://runs/{run['run_id']}/submissions/{view['submission_id']}"
    feedback = json.loads((await client.read_resource(f"{base}/feedback")).contents[0].text)
    assert feedback["score"] == 500.0 and len(feedback["episode_summaries"]) == 2
    episode = json.loads((await client.read_resource(f"{base}/episodes/1")).contents[0].text)
    assert [e["index"] for e in episode["episode_summaries"]] == [1]
    assert episode["traces"] and episode["traces"][0]["steps"]

    prompt = await client.get_prompt("evolve_policy", {"task_id": MINI})
    text = prompt.messages[0].content.text
    for phrase in ("baseline", "matched", "offset", "finalize", "Budget: 12 episodes"):
        assert phrase in text, phrase


async def test_a_missing_resource_is_a_not_found_error_that_names_what_to_do(
    client: Client,
) -> None:
    run = await call(client, "start_run", task_id=MINI)
    view = await submit(client, run["run_id"], "0:2", PD_FILES)
    base = f"evopolicy://runs/{run['run_id']}/submissions"
    missing = {
        "evopolicy://runs/run-nope/submissions/s1/feedback": "start_run",
        f"{base}/s9/feedback": "run_status",
        f"{base}/s9/episodes/0": "run_status",
        f"{base}/{view['submission_id']}/episodes/7": "0:2",
        f"{base}/{view['submission_id']}/episodes/x": "pool index",
        f"{base}/{view['submission_id']}/episodes/0/files/trajectory.jsonl.gz": "artifacts",
        f"evopolicy://tasks/{MINI}x": MINI,  # the nearest ids, among many tasks
    }
    for uri, advice in missing.items():
        with pytest.raises(MCPError) as info:
            await client.read_resource(uri)
        assert info.value.error.code == INVALID_PARAMS, (uri, info.value.error)
        assert advice in info.value.error.message, (uri, info.value.error.message)
    templates = (await client.list_resource_templates()).resource_templates
    files = next(t for t in templates if t.uri_template.endswith("/files/{name}"))
    assert files.mime_type == "application/octet-stream"  # not text: each file has its own


async def test_the_legacy_handshake_serves_the_same_tools(host: Host) -> None:
    async with Client(build_server(host), mode="legacy") as c:
        assert {t.name for t in (await c.list_tools()).tools} == TOOLS
        run = await call(c, "start_run", task_id=MINI)
        assert (await submit(c, run["run_id"], "0", PD_FILES))["score"] == 500.0
