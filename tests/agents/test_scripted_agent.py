"""The scripted agent as a launcher runs it: a subprocess in a workspace, a real server.

The server comes from a Claude-Code config (its task directory only through the
config entry's ``env``), the agent gets a minimal environment and no stdin, and
the records are read back with a :class:`Host` on the same data directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evopolicy_mcp.agents.config import Launch, local_launch, render
from evopolicy_mcp.host.authority import Host
from tests.support.host import BASELINE_DIR, SEED, write_task

RUN = "agent-run"
PROMPT = "Evolve a policy for the task `mini`. Use the tools of the evopolicy server."
LOG_TYPES = {"start", "tool_call", "tool_result", "plan", "compare", "note", "result"}


def _config(tmp_path: Path, data_dir: Path, tasks_dir: Path) -> Path:
    """A .mcp.json for a server bound to run RUN of ``mini``, as a launcher writes it."""
    served = local_launch(task="mini", run=RUN, data_dir=data_dir)
    launch = Launch(
        served.command,
        (*served.args, "--seed", str(SEED)),
        env={"EVOPOLICY_TASKS": str(tasks_dir)},
    )
    path = tmp_path / "mcp.json"
    path.write_text(render("claude", launch))
    return path


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "workspace"
    shutil.copytree(BASELINE_DIR, workspace / "program")
    return workspace


def _agent(workspace: Path, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evopolicy_mcp.agents.scripted_agent", "--mcp-config", str(config)]
        + list(args),
        cwd=workspace,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        # What a launcher leaves an agent: nothing of the operator's environment.
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
        start_new_session=True,
    )


def _log(stdout: str) -> list[dict[str, Any]]:
    lines = stdout.splitlines()
    assert lines, "the agent printed nothing on stdout"
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all(isinstance(r, dict) and r.get("type") in LOG_TYPES for r in records), records
    assert records[-1]["type"] == "result"
    return records


def _one_line_failure(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("scripted_agent: "), proc.stderr
    result = _log(proc.stdout)[-1]
    assert result["finalized"] is False and result["error"] in lines[0]
    return lines[0]


def test_the_scripted_agent_beats_the_baseline_on_matched_indices_and_finalizes(
    tmp_path: Path, data_dir: Path
) -> None:
    tasks_dir = write_task(tmp_path / "tasks", episodes=24, submissions=12)
    workspace = _workspace(tmp_path)
    baseline_source = (workspace / "program" / "policy.py").read_text()

    proc = _agent(workspace, _config(tmp_path, data_dir, tasks_dir), "--seed", "0", PROMPT)

    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    log = _log(proc.stdout)
    result = log[-1]
    assert result["finalized"] is True and result["run_id"] == RUN
    logged_scores = {
        r["summary"]["submission_id"]: r["summary"]["score"]
        for r in log
        if r["type"] == "tool_result" and r["tool"] == "submit_policy"
    }
    calls = [r["tool"] for r in log if r["type"] == "tool_call"]
    # describe_task once per page of the spec
    distinct = [c for i, c in enumerate(calls) if i == 0 or c != calls[i - 1]]
    assert distinct[:3] == ["list_tasks", "describe_task", "start_run"]

    with Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED) as host:
        assert host.run_status(RUN).state in ("finalizing", "finalized")
        status = host.wait_final(RUN, 60)
        report = host.report(RUN)

    subs = {s.submission_id: s for s in report.submissions}
    assert status.state == "finalized" and report.selected in report.candidates
    # The candidates are the agent's own, distinct programs, at most the task's limit.
    assert report.candidates == result["candidates"]
    assert set(report.candidates) <= set(subs) and 1 <= len(report.candidates) <= 2
    assert len({subs[c].program_digest for c in report.candidates}) == len(report.candidates)
    # Every submission is a matched comparison on the same indices, and the log is honest.
    assert {s.selector for s in subs.values()} == {"0:2"}
    assert logged_scores == {sid: s.score for sid, s in subs.items()}
    # Within budget: 12 submissions of 2 episodes fit exactly.
    assert report.episodes_used == 2 * len(subs) <= report.budget.episodes
    assert report.submissions_used == len(subs) <= report.budget.submissions
    assert len(subs) > 1, "no candidate beyond the baseline was tried"
    # Best first, and better than the weak random baseline (submitted first).
    scores = [s.score for s in subs.values() if s.score is not None]
    baseline = min(subs.values(), key=lambda s: s.ordinal)
    best = subs[report.candidates[0]]
    assert best.score == max(scores)
    assert baseline.score is not None and best.score > baseline.score
    # The workspace ends with the best program, not the baseline.
    final_source = (workspace / "program" / "policy.py").read_text()
    assert final_source != baseline_source and "LinearPolicy" in final_source


def test_spaces_without_a_candidate_family_get_the_baseline_alone(
    tmp_path: Path, data_dir: Path
) -> None:
    # Blackjack observes a tuple of discretes: not a space the linear family handles.
    tasks_dir = write_task(tmp_path / "tasks", env_id="Blackjack-v1")
    workspace = _workspace(tmp_path)

    proc = _agent(workspace, _config(tmp_path, data_dir, tasks_dir), "--task", "mini")

    assert proc.returncode == 0, proc.stderr
    log = _log(proc.stdout)
    plan = next(r for r in log if r["type"] == "plan")
    assert plan["family"] is None and plan["rounds"] == 0
    with Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED) as host:
        report = host.report(RUN)
    assert [s.submission_id for s in report.submissions] == report.candidates
    assert len(report.candidates) == 1 and log[-1]["candidates"] == report.candidates
    assert (workspace / "program" / "policy.py").read_text() == (
        BASELINE_DIR / "policy.py"
    ).read_text()


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("--task", "nope"), ("describe_task was rejected", "serves only task 'mini'")),
        (("--server", "other", PROMPT), ("has no mcpServers.other entry",)),
    ],
)
def test_a_rejected_start_exits_1_with_one_line_and_starts_no_run(
    tmp_path: Path, data_dir: Path, tasks_dir: Path, args: tuple[str, ...], reason: tuple[str, ...]
) -> None:
    workspace = _workspace(tmp_path)

    proc = _agent(workspace, _config(tmp_path, data_dir, tasks_dir), *args)

    line = _one_line_failure(proc)
    assert all(part in line for part in reason), line
    with Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED) as host:
        assert host.runs() == []
