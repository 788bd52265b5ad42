"""`evopolicy-mcp bench` runs end to end and reports consistent figures (no timing asserted)."""

from __future__ import annotations

import json
import math
import os

import pytest

from evopolicy_mcp.cli.bench import run_bench
from evopolicy_mcp.cli.main import main
from tests.support.kernel import children_of, process_state


def test_bench_reports_every_figure_from_its_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--json", "--episodes", "4", "--rounds", "2"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert (figures["episodes"], figures["rounds"]) == (4, 2)
    assert figures["raw_episodes_per_s"] > 0 and figures["harness_episodes_per_s"] > 0
    assert figures["ratio_min"] <= figures["ratio"] <= figures["ratio_max"]
    assert figures["rss_from_episode"] == 1  # fewer than 11 episodes: from the first
    for name in ("fixed_overhead_ms", "per_step_overhead_us", "rss_growth_mb"):
        assert math.isfinite(figures[name]), name
    waits = [figures[f"thread_wait_ms_{k}"] for k in ("p50", "p99", "max")]
    assert 0 <= waits[0] <= waits[1] <= waits[2] < 10_000, waits


def test_bench_refuses_a_count_that_is_not_positive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["bench", "--rounds", "0"])
    assert exited.value.code != 0
    assert "--rounds" in capsys.readouterr().err


FALLS = """\
def make_policy(context):
    return Push()


class Push:
    def act(self, observation):
        return 1  # always right: the pole falls within some 10 steps
"""


def test_a_failed_bench_leaves_no_policy_template_behind() -> None:
    before = set(children_of(os.getpid()))
    with pytest.raises(RuntimeError, match="not 500"):
        run_bench(episodes=2, rounds=1, controller=FALLS)
    left = [p for p in children_of(os.getpid()) if p not in before and process_state(p) != "Z"]
    assert left == [], "the bench's runner was not closed"


def test_bench_sizes_measures_every_result_an_agent_reads() -> None:
    from evopolicy_mcp.cli.bench_sizes import run_sizes

    rows = {row["result"]: row for row in run_sizes(crafter_episodes="0:2")}
    for name in (
        "tools/list",
        "describe_task cartpole page 1",
        "describe_task crafter page 2",
        "submit_policy crafter 0:2",
        "get_feedback crafter offset 0",
        "get_feedback crafter episode=0",
    ):
        assert name in rows, sorted(rows)
    for name, row in rows.items():
        assert row["wire"] > 0, name
        if not name.startswith("tools/list"):
            # Text and structured content are the same compact document.
            assert row["text"] == row["structured"] > 0, row
            assert row["wire"] > row["text"] + row["structured"], row


def test_bench_task_reports_raw_and_harness_figures_for_any_task(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "--task", "frozenlake", "--episodes", "4", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["task"] == "frozenlake" and figures["episodes"] == 4
    assert figures["raw_steps_per_s"] > 0 and figures["harness_steps_per_s"] > 0
    assert math.isclose(
        figures["ratio"], figures["harness_steps_per_s"] / figures["raw_steps_per_s"]
    )
    for name in ("per_step_overhead_us", "fixed_overhead_ms", "host_rss_mb"):
        assert math.isfinite(figures[name]), name  # short episodes give a second length
    # The environment's own step is part of a raw step (which adds the policy's act).
    assert figures["env_step_median_us"] > 0
    assert 0 < figures["env_step_us"] < figures["raw_step_us"]
    assert 0 < figures["env_step_before_last_us"] < math.inf


def test_bench_task_says_what_to_install_for_a_missing_extra_or_an_unknown_task(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "--task", "nope"]) == 2
    assert "unknown task 'nope'" in capsys.readouterr().err
