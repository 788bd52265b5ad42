"""The leaderboard's numbers against ones worked out by hand from real runs."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

from evopolicy_mcp.cli.main import main
from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.results.leaderboard import build_leaderboard
from evopolicy_mcp.results.stats import mean_interval, t_quantile
from evopolicy_mcp.results.summary import summarize_all
from evopolicy_mcp.results.usage import read_usage
from tests.support.host import GOOD, RANDOM, write_task
from tests.support.results import finished_run, write_reference_task

T_975_DF2 = 4.303  # two-sided 95% Student t, 2 degrees of freedom (any t-table)
WEAK = GOOD.replace("0.3 * observation[3]", "0.0 * observation[3]")
CLAUDE_RESULT = {
    "type": "result",
    "subtype": "success",
    "total_cost_usd": 0.25,
    "usage": {
        "input_tokens": 100,
        "cache_creation_input_tokens": 1000,
        "cache_read_input_tokens": 9000,
        "output_tokens": 700,
    },
}


@pytest.fixture(scope="module")
def board_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Three complete runs of one agent on ``ref`` (stated baseline 10, reference 110), one
    confined run, one run whose agent never reached it, one run on ``mini``."""
    root = tmp_path_factory.mktemp("board")
    tasks = write_reference_task(root / "tasks", "ref", baseline=10.0, reference=110.0)
    write_task(tasks, "mini")
    write_reference_task(tasks, "ref2", baseline=0.0, reference=500.0)
    with Host(root / "data", tasks_dirs=[tasks], seed=5) as host:
        store = host.store
        for i, files in enumerate(
            ({"policy.py": GOOD}, {"policy.py": WEAK}, {"policy.py": RANDOM})
        ):
            rid, _ = finished_run(host, "ref", [("0:4", files), ("4:6", files)], [1])
            # What the launcher records about the agent, and the CLI's stdout it keeps.
            store.add_event(rid, "agent_started", {"agent": "claude", "model": "m1"})
            store.add_event(rid, "agent_ended", {"agent": "claude", "reason": "finalized",
                                                  "seconds": 100.0 + 10 * i})  # fmt: skip
            agent_dir = store.run_dir(rid) / "agent"
            agent_dir.mkdir(parents=True)
            line = dict(CLAUDE_RESULT, total_cost_usd=0.25 * (i + 1))
            (agent_dir / "stdout.jsonl").write_text('{"type":"system"}\n' + json.dumps(line) + "\n")
        rid, _ = finished_run(host, "ref", [("0:4", {"policy.py": GOOD})], [0])
        store.add_event(rid, "agent_started",
                        {"agent": "claude", "model": "m1", "confinement": {"confined": True}})  # fmt: skip
        failed = host.start_run("ref").run_id
        store.add_event(failed, "agent_started", {"agent": "claude", "model": "m1"})
        store.add_event(failed, "agent_ended", {"reason": "failed_to_start", "message": "no login"})
        finished_run(host, "mini", [("0:4", {"policy.py": GOOD})], [0])
        rid, _ = finished_run(host, "ref2", [("0:4", {"policy.py": WEAK})], [0])
        store.add_event(rid, "agent_started", {"agent": "claude", "model": "m1"})
    yield root / "data"


def test_t_quantiles_match_the_tables() -> None:
    for df, table in ((1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228), (30, 2.042)):
        assert t_quantile(df) == pytest.approx(table, abs=1e-3)
    assert mean_interval([3.0]).low is None
    assert mean_interval([]).mean is None


def test_a_task_row_is_the_hand_computed_mean_interval_gap_and_normalised_score(
    board_dir: Path,
) -> None:
    from evopolicy_mcp.store.database import Store

    store = Store(board_dir, create=False)
    try:
        runs = summarize_all(store)
        board = build_leaderboard(runs, task="ref")
        by_run = {r.run_id: r for r in runs}
        # The hand computation reads the three runs' records directly.
        chosen = [
            r for r in store.list_runs()
            if r.task_id == "ref" and any(e.kind == "agent_ended" and e.detail.get("seconds")
                                          for e in store.events(r.id))
        ]  # fmt: skip
        assessment, public, used = [], [], []
        for run in chosen:
            test = next(x for x in store.results(run.id) if x.split == "test")
            assessment.append(test.score)
            public.append(next(s.score for s in store.list_submissions(run.id)
                               if s.id == run.selected))  # fmt: skip
            used.append(sum(s.charged for s in store.list_submissions(run.id)))
    finally:
        store.close()
    assert len(chosen) == 3 and len(set(assessment)) > 1, assessment
    row = next(r for r in board.tasks if r.agent == "claude:m1" and not r.confined)
    mean = sum(assessment) / 3
    sd = math.sqrt(sum((a - mean) ** 2 for a in assessment) / 2)
    half = T_975_DF2 * sd / math.sqrt(3)
    assert (row.runs, row.complete, row.failed) == (
        4,
        3,
        1,
    )  # the failed run: counted, not averaged
    assert row.assessment_mean == pytest.approx(mean)
    assert row.assessment_low == pytest.approx(mean - half, rel=1e-3)
    assert row.assessment_high == pytest.approx(mean + half, rel=1e-3)
    assert row.public_mean == pytest.approx(sum(public) / 3)
    assert row.gap_public_assessment == pytest.approx(
        sum(p - a for p, a in zip(public, assessment, strict=True)) / 3
    )
    assert row.normalised_mean == pytest.approx((mean - 10.0) / (110.0 - 10.0))
    assert row.episodes_used_mean == pytest.approx(sum(used) / 3) and used[0] == 6
    assert row.wall_seconds_mean == pytest.approx(110.0)
    assert row.input_tokens_mean == pytest.approx(10_100) and row.output_tokens_mean == 700
    assert row.cost_usd_mean == pytest.approx(0.5)
    # The confined run has a row of its own; it never lifts or lowers the other.
    confined = next(r for r in board.tasks if r.confined)
    assert (confined.runs, confined.complete) == (1, 1)
    assert board.tasks[0].confined, "confined rows come first"
    assert {by_run[i].confinement for i in row.run_ids} == {"unknown"}


def test_a_family_row_averages_normalised_task_means_of_tasks_with_a_reference(
    board_dir: Path,
) -> None:
    from evopolicy_mcp.store.database import Store

    store = Store(board_dir, create=False)
    try:
        board = build_leaderboard(summarize_all(store), family="gymnasium")
    finally:
        store.close()
    direct = next(f for f in board.families if f.agent == "-")
    assert direct.task_ids == ["mini"] and direct.normalised_tasks == 0
    assert direct.normalised_mean is None
    claude = next(f for f in board.families if f.agent == "claude:m1" and not f.confined)
    task_row = next(r for r in board.tasks if r.agent == "claude:m1" and not r.confined)
    other = next(r for r in board.tasks if r.task_id == "ref2")
    assert other.normalised_mean == pytest.approx(other.assessment_mean / 500.0)
    assert claude.task_ids == ["ref", "ref2"] and claude.normalised_tasks == 2
    assert claude.normalised_mean == pytest.approx(
        statistics.fmean([task_row.normalised_mean, other.normalised_mean])
    )


def test_the_leaderboard_command_prints_json_text_and_marks_what_is_not_confined(
    board_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["leaderboard", "--data-dir", str(board_dir), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {r["task_id"] for r in data["tasks"]} == {"ref", "ref2", "mini"}
    assert main(["leaderboard", "--data-dir", str(board_dir), "--task", "ref"]) == 0
    text = capsys.readouterr().out
    assert "claude:m1" in text and "NO" in text and "$0.50" in text
    assert main(["leaderboard", "--data-dir", str(board_dir), "--experiment", "nope"]) == 2
    assert "no experiment 'nope'" in capsys.readouterr().err


def test_codex_turns_are_added_up_and_silent_clis_report_nothing(tmp_path: Path) -> None:
    out = tmp_path / "stdout.jsonl"
    turn = {"type": "turn.completed", "usage": {"input_tokens": 500, "cached_input_tokens": 200,
                                                "output_tokens": 40}}  # fmt: skip
    out.write_text("\n".join([json.dumps(turn), "not json", json.dumps(turn)]) + "\n")
    usage = read_usage(out)
    assert usage is not None
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (1000, 400, 80)
    assert usage.cost_usd is None
    out.write_text('{"event":"submitted","score":3}\n')
    assert read_usage(out) is None
    assert read_usage(tmp_path / "missing") is None
