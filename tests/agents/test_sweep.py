"""Sweeps: a sweep killed mid-way resumes without redoing a finished run, and completes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evopolicy_mcp.agents.procs import members
from evopolicy_mcp.agents.sweep import SweepConfig, SweepError, parse_agents, plan_cells, sweep
from evopolicy_mcp.cli.main import main
from evopolicy_mcp.store.database import Store
from evopolicy_mcp.store.experiments import read_experiment
from tests.support.host import write_task


def _sweep_cmd(data: Path, tasks: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "evopolicy_mcp", "agent", "sweep", "--data-dir", str(data),
            "--tasks-dir", str(tasks), *extra]  # fmt: skip


def _wait(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.2)


def _states(data: Path) -> dict[str, str]:
    if not (data / "evopolicy.sqlite3").exists():
        return {}
    store = Store(data, create=False)
    try:
        return {r.id: r.state for r in store.list_runs()}
    finally:
        store.close()


def test_a_killed_sweep_resumes_without_redoing_finished_runs(tmp_path: Path) -> None:
    tasks = write_task(tmp_path / "tasks")
    data = tmp_path / "data"
    first = "e1.mini.scripted.r1"
    second = "e1.mini.scripted.r2"
    proc = subprocess.Popen(
        _sweep_cmd(
            data,
            tasks,
            "--agents",
            "scripted",
            "--tasks",
            "mini",
            "--repeat",
            "3",
            "--experiment",
            "e1",
            "--seed",
            "9",
            "--timeout",
            "120",
        ),  # fmt: skip
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _wait(lambda: _states(data).get(first) == "finalized", 120, "the first run")
        _wait(lambda: second in _states(data), 60, "the second run to start")
        proc.kill()  # SIGKILL: no chance to clean up; its cell gets SIGTERM from the kernel
        proc.wait(10)
        # The cell stops its agent and records that the session was cut.
        _wait(lambda: not members(proc.pid), 90, "the sweep's processes to end")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    record = read_experiment(data, "e1")
    assert record is not None
    assert record.cells[0].attempts == [first] and record.cells[1].attempts == [second]
    assert [c.attempts for c in record.cells[2:]] == [[]]
    store = Store(data, create=False)
    try:
        finished_at = store.get_run(first).finalized  # type: ignore[union-attr]
        cut = store.get_run(second)
        assert cut is not None
        second_done = cut.state == "finalized"
    finally:
        store.close()

    done = subprocess.run(
        _sweep_cmd(data, tasks, "--resume", "e1", "--json"), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["complete"] is True and len(result["runs"]) == 3
    ran = [r["run_id"] for r in result["ran"]]
    assert first not in ran, "a finished run was redone"
    record = read_experiment(data, "e1")
    assert record is not None
    assert record.cells[0].attempts == [first]
    if not second_done:  # cut mid-session: abandoned, and a new attempt made
        assert record.cells[1].attempts == [second, f"{second}.a2"]
    store = Store(data, create=False)
    try:
        runs = {r.id: r for r in store.list_runs()}
        assert runs[first].finalized == finished_at
        assert sum(e.kind == "agent_started" for e in store.events(first)) == 1
        for rid in record.runs():
            assert runs[rid].state == "finalized", rid
        if not second_done:
            ended = [
                e.detail.get("reason") for e in store.events(second) if e.kind == "agent_ended"
            ]
            assert ended == ["interrupted"] and runs[second].state == "open"
    finally:
        store.close()
    # Runs of the same repeat share hidden episodes (the sweep seed): one repeat, one secret.
    # And the experiment feeds the leaderboard.
    assert main(["leaderboard", "--data-dir", str(data), "--experiment", "e1", "--json"]) == 0


def test_bad_sweep_input_is_one_line_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(SweepError, match="unknown agent 'gpt'"):
        parse_agents("gpt:4")
    with pytest.raises(SweepError, match="takes no model"):
        parse_agents("scripted:x")
    specs = parse_agents("claude:m:high,scripted")
    assert [s.label for s in specs] == ["claude:m:high", "scripted"]
    config = SweepConfig(agents=tuple(specs), tasks=("a", "b"), repeat=2)
    cells = plan_cells(config)
    assert len(cells) == 8 and [c.repeat for c in cells[:4]] == [1, 1, 1, 1]
    with pytest.raises(SweepError, match="no experiment 'zz'"):
        sweep("zz", None, tmp_path / "data")
    tasks = write_task(tmp_path / "tasks")
    done = subprocess.run(
        _sweep_cmd(tmp_path / "data", tasks, "--agents", "scripted", "--tasks", "nope"),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "unknown task 'nope'" in done.stderr
    assert not (tmp_path / "data" / "experiments").exists()
