"""The finish rule: ``early`` (the budget is a maximum) or ``exhaust`` (finalize only
once every episode is spent), per task or per run."""

from __future__ import annotations

import time
from pathlib import Path

from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.store.database import Rejected
from tests.support.host import GOOD, charges, finish, rejected, write_task


def _exhaust_task(tmp_path: Path, **budget: object) -> Path:
    return write_task(tmp_path / "exhaust", "spend", finish="exhaust", **budget)  # type: ignore[arg-type]


def test_finalize_is_refused_while_episodes_remain_and_the_run_stays_open(
    data_dir: Path, tmp_path: Path
) -> None:
    tasks = _exhaust_task(tmp_path, episodes=8, submissions=4, per_submission=4)
    with Host(data_dir, tasks_dirs=[tasks]) as h:
        run = h.start_run("spend")
        assert run.budget.finish == "exhaust"
        assert any("Spend the whole budget" in rule for rule in run.rules)
        first = finish(h, run.run_id, "0:4", {"policy.py": GOOD}).submission_id
        error = rejected(lambda: h.finalize(run.run_id, [first]), "budget_left")
        assert "4 episodes remain" in error.message and "stays open" in error.message
        assert h.store.get_run(run.run_id).state == "open"  # type: ignore[union-attr]
        assert charges(h, run.run_id) == (4, 1, 1)
        # Nothing was lost: the run takes the rest of its budget, then finalize.
        second = finish(h, run.run_id, "4:8", {"policy.py": GOOD}).submission_id
        ack = h.finalize(run.run_id, [second, first])
        assert ack.state == "finalizing"
        assert h.wait_final(run.run_id, 120).state == "finalized"


def test_a_selector_that_would_strand_the_budget_is_refused_without_charging(
    data_dir: Path, tmp_path: Path
) -> None:
    tasks = _exhaust_task(tmp_path, episodes=12, submissions=3, per_submission=4)
    with Host(data_dir, tasks_dirs=[tasks]) as h:
        run = h.start_run("spend").run_id
        # 2 now would leave 10 for two submissions of at most 4.
        error = rejected(
            lambda: h.submit(run, "0:2", files={"policy.py": GOOD}), "would_strand_budget"
        )
        assert "select at least 4 indices" in error.message
        assert charges(h, run) == (0, 0, 0)
        finish(h, run, "0:4", {"policy.py": GOOD})
        assert charges(h, run) == (4, 1, 1)


def test_the_store_repeats_the_rule_in_its_one_transaction(data_dir: Path, tmp_path: Path) -> None:
    tasks = _exhaust_task(tmp_path, episodes=12, submissions=3, per_submission=4)
    with Host(data_dir, tasks_dirs=[tasks]) as h:
        run = h.start_run("spend").run_id
        program = {"digest": "0" * 64, "files": ["policy.py"], "size": 1}
        try:
            h.store.reserve(run, selector="0", indices=[0], program=program)
        except Rejected as refused:
            assert refused.code == "would_strand_budget"
            assert refused.info["least"] == 4
        else:
            raise AssertionError("the store admitted a submission that strands the budget")
        assert h.store.usage(run).episodes == 0


def test_when_submissions_or_time_run_out_finalize_is_accepted(
    data_dir: Path, tmp_path: Path
) -> None:
    tasks = write_task(tmp_path / "timed", "timed", finish="exhaust", episodes=8, wall_seconds=1.5)
    with Host(data_dir, tasks_dirs=[tasks]) as h:
        run = h.start_run("timed").run_id
        done = finish(h, run, "0:4", {"policy.py": GOOD}).submission_id
        rejected(lambda: h.finalize(run, [done]), "budget_left")
        created = h.store.get_run(run).created  # type: ignore[union-attr]
        time.sleep(max(0.0, 1.6 - (time.time() - created)))
        assert h.finalize(run, [done]).state == "finalizing"


def test_a_host_sets_the_rule_of_its_runs_and_the_records_say_so(
    data_dir: Path, tasks_dir: Path
) -> None:
    with Host(data_dir, tasks_dirs=[tasks_dir], finish="exhaust") as h:
        assert h.describe_task("mini").budget.finish == "early"  # the task's own rule
        run = h.start_run("mini")
        assert run.budget.finish == "exhaust"
        done = finish(h, run.run_id, "0:4", {"policy.py": GOOD}).submission_id
        rejected(lambda: h.finalize(run.run_id, [done]), "budget_left")
        assert h.report(run.run_id).reproducibility["finish"] == "exhaust"
    with Host(data_dir, tasks_dirs=[tasks_dir]) as h:
        run = h.start_run("mini")
        assert run.budget.finish == "early"
        done = finish(h, run.run_id, "0:4", {"policy.py": GOOD}).submission_id
        assert h.finalize(run.run_id, [done]).state == "finalizing"
        assert h.report(run.run_id).reproducibility["finish"] == "early"
