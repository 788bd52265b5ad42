"""Every rule the host enforces, seen from the agent's side: each refusal arrives as a
tool error saying what to do next, and charges nothing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.server.app import build_server
from tests.support.server import MINI, PD_FILES, call, call_error, submit, usage

pytestmark = pytest.mark.anyio


Setup = Callable[[Client, str], Awaitable[dict[str, Any]]]


async def _nothing(client: Client, run_id: str) -> dict[str, Any]:
    return {}


async def _two_done(client: Client, run_id: str) -> dict[str, Any]:
    a = await submit(client, run_id, "0:2", PD_FILES)
    return {"sid": a["submission_id"]}


async def _budget_spent(client: Client, run_id: str) -> dict[str, Any]:
    for _ in range(3):
        await submit(client, run_id, "0:4", PD_FILES)
    return {}


async def _submissions_spent(client: Client, run_id: str) -> dict[str, Any]:
    for _ in range(6):
        await submit(client, run_id, "0", PD_FILES)
    return {}


async def _finalized(client: Client, run_id: str) -> dict[str, Any]:
    a = await submit(client, run_id, "0", PD_FILES)
    await call(client, "finalize", run_id=run_id, candidates=[a["submission_id"]])
    return {}


def _submit_args(episodes: str, **extra: Any) -> Callable[[str, dict], tuple[str, dict]]:
    def build(run_id: str, ctx: dict) -> tuple[str, dict]:
        args = {"run_id": run_id, "episodes": episodes, "files": PD_FILES, **extra}
        return "submit_policy", {k: v for k, v in args.items() if v is not None}

    return build


def _finalize_args(candidates: Callable[[dict], list[str]]) -> Callable[[str, dict], tuple]:
    return lambda run_id, ctx: ("finalize", {"run_id": run_id, "candidates": candidates(ctx)})


REJECTIONS: dict[str, tuple[Setup, Callable[[str, dict], tuple[str, dict]], str]] = {
    "unknown_run": (
        _nothing,
        lambda run_id, ctx: (
            "submit_policy",
            {"run_id": "run-nope", "episodes": "0", "files": PD_FILES},
        ),
        "start_run",
    ),
    "unknown_submission": (
        _nothing,
        lambda run_id, ctx: ("get_feedback", {"run_id": run_id, "submission_id": "s99"}),
        "run_status",
    ),
    "bad_selector": (_nothing, _submit_args("3:1"), "increasing order"),
    "bad_selector_spaces_inside": (_nothing, _submit_args("0,,2"), "e.g."),
    "out_of_pool": (_nothing, _submit_args("0:9"), "0..7"),
    "over_cap": (_nothing, _submit_args("0:5"), "at most 4"),
    "over_budget": (_budget_spent, _submit_args("0"), "remain"),
    "submission_limit": (_submissions_spent, _submit_args("1"), "finalize"),
    "run_closed": (_finalized, _submit_args("1"), "finalize"),
    "program_without_policy_py": (
        _nothing,
        lambda run_id, ctx: (
            "submit_policy",
            {"run_id": run_id, "episodes": "0", "files": {"helper.py": "X = 1\n"}},
        ),
        "policy.py",
    ),
    "program_with_a_syntax_error": (
        _nothing,
        lambda run_id, ctx: (
            "submit_policy",
            {"run_id": run_id, "episodes": "0", "files": {"policy.py": "def make_policy(:\n"}},
        ),
        "policy.py",
    ),
    "program_given_twice": (_nothing, _submit_args("0", program_dir="/tmp"), "exactly one"),
    "program_dir_missing": (
        _nothing,
        lambda run_id, ctx: (
            "submit_policy",
            {"run_id": run_id, "episodes": "0", "program_dir": "/no/such/dir"},
        ),
        "does not exist",
    ),
    "bad_episode": (
        _two_done,
        lambda run_id, ctx: (
            "get_feedback",
            {"run_id": run_id, "submission_id": ctx["sid"], "episode": 5},
        ),
        "0:2",
    ),
    "duplicate_candidates": (_two_done, _finalize_args(lambda c: [c["sid"], c["sid"]]), "twice"),
    "unknown_candidate": (_two_done, _finalize_args(lambda c: [c["sid"], "s42"]), "run_status"),
    "too_many_candidates": (_two_done, _finalize_args(lambda c: [c["sid"]] * 3), "at most 2"),
}


@pytest.mark.parametrize("case", sorted(REJECTIONS))
async def test_a_rejection_reaches_the_agent_as_an_error_and_charges_nothing(
    client: Client, case: str
) -> None:
    setup, build, advice = REJECTIONS[case]
    run = await call(client, "start_run", task_id=MINI)
    ctx = await setup(client, run["run_id"])
    before = await call(client, "run_status", run_id=run["run_id"])
    tool, arguments = build(run["run_id"], ctx)
    message = await call_error(client, tool, **arguments)
    assert advice in message, message
    assert not message.rstrip().endswith(f"tool {tool}"), "the reason was lost"
    after = await call(client, "run_status", run_id=run["run_id"])
    assert (after["episodes_used"], after["submissions_used"]) == (
        before["episodes_used"],
        before["submissions_used"],
    )
    if before["state"] == "open":
        assert after["state"] == "open"


async def test_describe_or_start_an_unknown_task_is_an_actionable_error(client: Client) -> None:
    # Among many tasks, the error names the nearest ids.
    assert MINI in await call_error(client, "describe_task", task_id=MINI + "x")
    assert MINI in await call_error(client, "start_run", task_id=MINI + "x")
    assert "tasks in families" in await call_error(client, "start_run", task_id="nope")
    assert "another task" in await call_error(client, "describe_task", task_id="broken")


async def test_out_of_range_arguments_are_rejected_by_the_schema(client: Client) -> None:
    run = await call(client, "start_run", task_id=MINI)
    message = await call_error(
        client,
        "submit_policy",
        run_id=run["run_id"],
        episodes="0",
        files=PD_FILES,
        wait_seconds=999,
    )
    assert "wait_seconds" in message
    assert await usage(client, run["run_id"]) == (0, 0)


async def test_submissions_stop_when_the_wall_time_is_over(client: Client) -> None:
    run = await call(client, "start_run", task_id="cartpole-timed")
    await anyio.sleep(0.7)
    message = await call_error(
        client, "submit_policy", run_id=run["run_id"], episodes="0", files=PD_FILES
    )
    assert "wall time" in message and "finalize" in message
    assert await usage(client, run["run_id"]) == (0, 0)


async def test_run_limit_and_bound_run_are_enforced(tmp_path: Path, tasks_dir: Path) -> None:
    with Host(tmp_path / "limited", tasks_dirs=[tasks_dir], max_runs=1) as limited:
        async with Client(build_server(limited)) as c:
            await call(c, "start_run", task_id=MINI)
            assert "run_id you already have" in await call_error(c, "start_run", task_id=MINI)
    with Host(tmp_path / "bound", tasks_dirs=[tasks_dir], bind=(MINI, "bench-1")) as bound:
        async with Client(build_server(bound)) as c:
            assert [t["id"] for t in (await call(c, "list_tasks"))["tasks"]] == [MINI]
            first = await call(c, "start_run", task_id=MINI)
            again = await call(c, "start_run", task_id=MINI)
            assert first["run_id"] == again["run_id"] == "bench-1"
            assert "bench-1" in await call_error(c, "run_status", run_id="run-other")
            assert MINI in await call_error(c, "start_run", task_id="cartpole-timed")


async def test_twenty_concurrent_submissions_never_overspend(client: Client) -> None:
    run = await call(client, "start_run", task_id=MINI)
    outcomes: list[bool] = []

    async def one() -> None:
        result = await client.call_tool(
            "submit_policy",
            {"run_id": run["run_id"], "episodes": "0:3", "files": PD_FILES, "wait_seconds": 0},
        )
        outcomes.append(not result.is_error)

    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(one)
    assert outcomes.count(True) == 4  # 12 episodes / 3 per submission
    assert await usage(client, run["run_id"]) == (12, 4)


SCHEMA_REJECTIONS = {
    # tool, arguments (beyond run_id), the words the one sentence must hold
    "wait_over_the_cap": (
        "submit_policy",
        {"episodes": "0", "files": PD_FILES, "wait_seconds": 100},
        ["wait_seconds", "a number from 0 to 50", "not 100"],
    ),
    "candidates_as_a_string": (
        "finalize",
        {"candidates": "s1"},
        ["candidates", "a list of strings with at least 1 item", "not the string 's1'"],
    ),
    "no_candidates": ("finalize", {"candidates": []}, ["candidates", "at least 1 item"]),
    "negative_episode": (
        "get_feedback",
        {"submission_id": "s1", "episode": -1},
        ["episode", "a whole number of at least 0 (or null)", "not -1"],
    ),
    "missing_selector": (
        "submit_policy",
        {"files": PD_FILES},
        ["episodes is required: a string (training-pool"],
    ),
    "files_not_text": (
        "submit_policy",
        {"episodes": "0", "files": {"policy.py": 5}},
        ["files['policy.py']", "string"],
    ),
}


@pytest.mark.parametrize("case", sorted(SCHEMA_REJECTIONS))
async def test_arguments_the_schema_refuses_get_one_sentence_naming_what_is_allowed(
    client: Client, case: str
) -> None:
    tool, arguments, words = SCHEMA_REJECTIONS[case]
    run = await call(client, "start_run", task_id=MINI)
    message = await call_error(client, tool, run_id=run["run_id"], **arguments)
    assert "\n" not in message and len(message) < 300, message
    assert "pydantic" not in message and "http" not in message, message
    assert message.startswith(f"Error executing tool {tool}: ") and message.endswith("."), message
    for word in words:
        assert word in message, (word, message)
    assert await usage(client, run["run_id"]) == (0, 0)
    assert (await call(client, "run_status", run_id=run["run_id"]))["open"]
