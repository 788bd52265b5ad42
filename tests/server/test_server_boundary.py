"""The trust boundary over MCP: nothing an agent can read holds a hidden score, seed,
secret or host path."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from evopolicy_mcp.evaluation import seeds
from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.server.app import build_server
from tests.support.server import (
    BASELINE_FILES,
    CRASHING_FILES,
    PD_FILES,
    error_text,
)

pytestmark = pytest.mark.anyio

LEAK = "cartpole-leak"


def _number_pattern(value: float) -> re.Pattern[str]:
    texts = {repr(value), f"{value:.4g}", f"{value:.6g}"}
    return re.compile(r"(?<![\d.])(" + "|".join(re.escape(t) for t in texts) + r")(?![\d])")


@pytest.fixture
def seeded_host(tmp_path: Path, tasks_dir: Path) -> Iterator[Host]:
    # A fixed seed makes the hidden scores reproducible, so the scan below is not left
    # to chance (an integral mean could not be told apart from an episode's step count).
    h = Host(tmp_path / "seeded", tasks_dirs=[tasks_dir], seed=3)
    yield h
    h.close()


async def test_no_agent_visible_output_holds_a_hidden_score_or_seed(seeded_host: Host) -> None:
    async with Client(build_server(seeded_host)) as client:
        await _scan_everything_the_agent_sees(client, seeded_host)


async def _scan_everything_the_agent_sees(client: Client, host: Host) -> None:
    seen: list[str] = []

    async def record(tool: str, **arguments: Any) -> dict[str, Any]:
        result = await client.call_tool(tool, arguments)
        seen.append(json.dumps(result.structured_content))
        seen.append(error_text(result))
        return dict(result.structured_content or {})

    tools = (await client.list_tools()).tools
    seen += [json.dumps(t.model_dump(mode="json")) for t in tools]
    await record("list_tasks")
    spec = await record("describe_task", task_id=LEAK)
    assert spec["baseline_files"]
    run = await record("start_run", task_id=LEAK)
    rid = run["run_id"]
    good = await record("submit_policy", run_id=rid, episodes="0:4", files=PD_FILES)
    assert good["score"] == 500.0
    weak = await record("submit_policy", run_id=rid, episodes="0:4", files=BASELINE_FILES)
    crash = await record("submit_policy", run_id=rid, episodes="4:6", files=CRASHING_FILES)
    await record("submit_policy", run_id=rid, episodes="0:99", files=PD_FILES)  # rejected
    # The weak baseline wins validation over the crasher, so its hidden scores are distinct.
    candidates = [crash["submission_id"], weak["submission_id"]]
    await record("finalize", run_id=rid, candidates=candidates)
    await anyio.to_thread.run_sync(host.wait_final, rid, 60)
    await record("finalize", run_id=rid, candidates=candidates)  # rejected: closed
    await record("run_status", run_id=rid)
    await record("run_status", run_id=rid, offset=1)
    await record("describe_task", task_id=LEAK, page=2)  # rejected: one page
    for sub in (good, weak, crash):
        sid = sub["submission_id"]
        first = sub["episode_summaries"][0]["index"]
        await record("get_feedback", run_id=rid, submission_id=sid)
        await record("get_feedback", run_id=rid, submission_id=sid, offset=1, limit=1)
        await record("get_feedback", run_id=rid, submission_id=sid, episode=first)
        # The compact forms: a trace page, and the one-line schema errors.
        await record("get_feedback", run_id=rid, submission_id=sid, episode=first, offset=3)
        await record("get_feedback", run_id=rid, submission_id=sid, wait_seconds=99)
        base = f"evopolicy://runs/{rid}/submissions/{sid}"
        seen.append((await client.read_resource(f"{base}/feedback")).contents[0].text)
        seen.append((await client.read_resource(f"{base}/episodes/{first}")).contents[0].text)
    for uri in ("evopolicy://abi", "evopolicy://instructions", f"evopolicy://tasks/{LEAK}"):
        seen.append((await client.read_resource(uri)).contents[0].text)
    prompt = await client.get_prompt("evolve_policy", {"task_id": LEAK})
    seen.append(prompt.messages[0].content.text)
    corpus = "\n".join(seen)

    report = host.report(rid)
    assert report.state == "finalized" and report.assessment is not None
    public_scores = {s.score for s in report.submissions}
    hidden = [v.score for v in report.validation] + [report.assessment.score]
    checked = [h for h in hidden if h is not None and h not in public_scores and h % 1]
    assert len(checked) == 2, f"hidden scores {hidden} cannot be told from public numbers"
    for value in checked:
        assert not _number_pattern(value).search(corpus), f"hidden score {value} leaked"

    secret = host.store.get_run(rid).secret
    assert secret.hex() not in corpus
    task = host.tasks[LEAK]
    for split, count in (
        ("train", task.budget.pool),
        ("validation", task.validation.episodes),
        ("test", task.assessment.episodes),
    ):
        for i in range(count):
            for seed in (
                seeds.episode_seed(secret, LEAK, split, i),
                seeds.policy_seed(secret, LEAK, split, i),
            ):
                assert str(seed) not in corpus, f"{split} seed {i} leaked"
    assert str(host.data_dir) not in corpus
