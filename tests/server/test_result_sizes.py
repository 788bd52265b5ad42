"""What an agent reads per tool result: compact, within RESULT_CHARS, paged for the rest.

Real hosts, real Crafter and CartPole episodes, the SDK's client in-process. The
bound is a contract (agent CLIs keep every result in the conversation); the
sizes themselves are printed by `evopolicy-mcp bench --sizes`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.host.pages import RESULT_CHARS
from evopolicy_mcp.server.app import build_server
from evopolicy_mcp.tasks.model import BUILTIN_TASKS_DIR
from tests.support.server import error_text, write_task
from tests.support.tasks import sample_tasks

pytestmark = pytest.mark.anyio

CRAFTER_BASELINE = {"policy.py": (BUILTIN_TASKS_DIR / "baselines/crafter/policy.py").read_text()}

# Prints a different long text in every episode, then fails with a different message:
# nothing on a page repeats, so twenty summaries cannot share one result.
TALKATIVE = """
def make_policy(context):
    return Talk(context.policy_seed)

class Talk:
    def __init__(self, seed):
        self.seed = seed

    def act(self, observation):
        print(f"{self.seed:x} " * 300)
        raise ValueError(f"seed {self.seed} " + "w" * 1500)
"""


def _nulls(document: dict[str, Any]) -> list[str]:
    """Fields sent as null (the task's own parameters and spaces may hold nulls as data)."""
    views = [document, document.get("remaining", {}), document.get("budget") or {}]
    views += document.get("episode_summaries", []) + document.get("submissions", [])
    return [key for view in views for key, value in view.items() if value is None]


async def read(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A successful result, checked: within the bound, its text the same compact
    document as its structured content, and no nulls in it."""
    result = await client.call_tool(tool, arguments)
    text = error_text(result)
    assert not result.is_error, text
    assert len(text) <= RESULT_CHARS, f"{tool} {arguments}: {len(text)} characters"
    document = json.loads(text)
    assert document == result.structured_content
    assert text == json.dumps(document, separators=(",", ":"), ensure_ascii=False)
    assert _nulls(document) == [], f"{tool} sent nulls"
    return dict(document)


async def listed(client: Client, **arguments: Any) -> tuple[list[str], list[dict[str, Any]]]:
    """Every task id list_tasks gives, page after page, and the first page's families."""
    first = await read(client, "list_tasks", **arguments)
    ids, page = [], first
    while True:
        ids += [t["id"] for t in page["tasks"]]
        assert page["total"] == first["total"] and page["families"] == first["families"]
        if page.get("next_offset") is None:
            break
        assert f"offset={page['next_offset']}" in page["hint"]
        page = await read(client, "list_tasks", **arguments, offset=page["next_offset"])
    return ids, first["families"]


async def test_hundreds_of_tasks_are_listed_in_pages_after_a_line_per_family(
    tmp_path: Path,
) -> None:
    with Host(tmp_path / "data") as host:
        async with Client(build_server(host)) as client:
            ids, families = await listed(client)
            assert len(ids) > 100 and ids == list(host.tasks)  # each once, in id order
            assert sum(f["tasks"] for f in families) == len(ids)
            by_family = {f["family"]: f for f in families}
            assert {"classic-control", "crafter", "puzzles"} <= set(by_family)
            # One family: only its tasks, every one of them.
            puzzles, only = await listed(client, family="puzzles")
            assert [f["family"] for f in only] == ["puzzles"]
            assert puzzles == [i for i in ids if host.tasks[i].family == "puzzles"]
            assert (
                len(puzzles) == by_family["puzzles"]["tasks"] == by_family["puzzles"]["available"]
            )
            past = await read(client, "list_tasks", offset=len(ids) + 5)
            assert past["tasks"] == [] and "past the last task" in past["hint"]
            unknown = await client.call_tool("list_tasks", {"family": "nope"})
            assert unknown.is_error and "families: " in error_text(unknown)


async def describe_every_page(client: Client, task: str) -> int:
    """``task``'s spec page by page, each within the bound; the pages add up to the
    whole spec (the resource). Returns how many pages it took."""
    first = await read(client, "describe_task", task_id=task)
    merged = dict(first)
    for page in range(2, first.get("pages", 1) + 1):
        more = await read(client, "describe_task", task_id=task, page=page)
        assert more["page"] == page and more["id"] == task
        assert set(more) & set(merged) <= {"id", "page", "pages", "hint"}
        merged.update(more)
    if first.get("pages", 1) > 1:
        assert "page=2" in first["hint"]
    whole = (await client.read_resource(f"evopolicy://tasks/{task}")).contents[0]
    full = json.loads(whole.text)  # type: ignore[union-attr]
    for key in ("page", "pages", "hint"):
        merged.pop(key, None)
    assert merged == full, task
    return int(first.get("pages", 1))


async def test_a_task_spec_of_every_family_comes_in_pages_within_the_bound_that_add_up(
    tmp_path: Path,
) -> None:
    with Host(tmp_path / "data") as host:
        async with Client(build_server(host)) as client:
            for task in sample_tasks():
                await describe_every_page(client, task.id)
            assert await describe_every_page(client, "crafter") > 1
            beyond = await client.call_tool("describe_task", {"task_id": "crafter", "page": 9})
            assert beyond.is_error and "page must be 1.." in error_text(beyond)


@pytest.mark.exhaustive
async def test_every_builtin_task_spec_comes_in_pages_within_the_bound_that_add_up(
    tmp_path: Path,
) -> None:
    with Host(tmp_path / "data") as host:
        async with Client(build_server(host)) as client:
            ids, _ = await listed(client)
            for task in ids:
                await describe_every_page(client, task)


@pytest.fixture(scope="module")
def crafter_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Host, str, str]]:
    """The crafter baseline on eight training episodes (two of them traced)."""
    with Host(tmp_path_factory.mktemp("crafter") / "data", seed=5) as host:
        run_id = host.start_run("crafter").run_id
        sid = host.submit(run_id, "0:8", files=CRAFTER_BASELINE)
        assert host.wait(run_id, sid, 300).status == "complete"
        yield host, run_id, sid


async def test_crafter_feedback_and_one_episode_with_its_whole_trace_fit_the_bound(
    crafter_run: tuple[Host, str, str],
) -> None:
    host, run_id, sid = crafter_run
    async with Client(build_server(host)) as client:
        page = await read(client, "get_feedback", run_id=run_id, submission_id=sid)
        assert [e["index"] for e in page["episode_summaries"]] == list(range(8))
        for summary in page["episode_summaries"]:
            assert summary["metrics"] and 0 not in summary["metrics"].values()
            assert "report" not in summary
        one = await read(client, "get_feedback", run_id=run_id, submission_id=sid, episode=0)
        (episode,) = one["episode_summaries"]
        assert episode["report"] and 0.0 in episode["metrics"].values()  # all of them
        steps = list(one["traces"][0]["steps"])
        while "next_offset" in one:
            assert f"offset={one['next_offset']}" in one["hint"]
            one = await read(
                client,
                "get_feedback",
                run_id=run_id,
                submission_id=sid,
                episode=0,
                offset=one["next_offset"],
            )
            steps += one["traces"][0]["steps"]
        uri = f"evopolicy://runs/{run_id}/submissions/{sid}/episodes/0"
        whole = json.loads((await client.read_resource(uri)).contents[0].text)  # type: ignore[union-attr]
        assert steps == whole["traces"][0]["steps"] and len(steps) > 1
        status = await read(client, "run_status", run_id=run_id)
        assert status["submissions"][0]["submission_id"] == sid


async def test_feedback_longer_than_one_result_is_paged_and_loses_no_episode(
    tmp_path: Path,
) -> None:
    tasks = write_task(tmp_path / "tasks", "cartpole-wide", episodes=40, per_submission=20, pool=20)
    with Host(tmp_path / "data", tasks_dirs=[tasks.parent]) as host:
        async with Client(build_server(host)) as client:
            run = await read(client, "start_run", task_id="cartpole-wide")
            view = await read(
                client,
                "submit_policy",
                run_id=run["run_id"],
                episodes="0:20",
                files={"policy.py": TALKATIVE},
            )
            assert view["failures"] == {"exception": 20}
            seen = [e["index"] for e in view["episode_summaries"]]
            pages = 1
            while "next_offset" in view:
                assert view["next_offset"] == len(seen)
                assert f"offset={view['next_offset']}" in view["hint"]
                view = await read(
                    client,
                    "get_feedback",
                    run_id=run["run_id"],
                    submission_id=view["submission_id"],
                    offset=view["next_offset"],
                )
                seen += [e["index"] for e in view["episode_summaries"]]
                pages += 1
            assert seen == list(range(20)) and pages > 2


async def test_run_status_of_many_submissions_is_paged(tmp_path: Path) -> None:
    tasks = write_task(
        tmp_path / "tasks", "cartpole-many", episodes=150, submissions=150, per_submission=1
    )
    invalid = {"policy.py": "def make_policy(context):\n    return Bad()\n\nclass Bad:\n"
               "    def act(self, observation):\n        return 7\n"}  # fmt: skip
    with Host(tmp_path / "data", tasks_dirs=[tasks.parent]) as host:
        run_id = host.start_run("cartpole-many").run_id
        for i in range(150):
            sid = host.submit(run_id, str(i % 8), files=invalid)
        assert host.wait(run_id, sid, 120).status == "complete"
        async with Client(build_server(host)) as client:
            status = await read(client, "run_status", run_id=run_id)
            listed = [s["submission_id"] for s in status["submissions"]]
            while "next_offset" in status:
                assert f"offset={status['next_offset']}" in status["hint"]
                status = await read(
                    client, "run_status", run_id=run_id, offset=status["next_offset"]
                )
                listed += [s["submission_id"] for s in status["submissions"]]
            assert listed == [f"s{i}" for i in range(1, 151)]
            assert status["submissions_used"] == 150
