"""`evopolicy-mcp demo` end to end: a real server subprocess and a scripted agent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_the_demo_plays_a_full_run_and_prints_the_operator_report(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "evopolicy_mcp", "demo", "--data-dir", str(tmp_path / "records")],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for step in (
        "list_tasks",
        "describe_task cartpole",
        "start_run",
        "submit_policy baseline",
        "submit_policy PD controller",
        "finalize",
    ):
        assert f"[agent] {step}" in out, step
    agent_part, _, operator_part = out.partition("[operator]")
    assert "validation" not in agent_part.replace("validating", "")
    assert "PD controller on the same indices 0:5: return 500" in agent_part
    for line in (
        "validation s1:",
        "validation s2:",
        "selected: s2",
        "assessment s2:",
        "gap: public",
    ):
        assert line in operator_part, line
    assert (tmp_path / "records").is_dir()  # a given data dir is kept
