"""Finalize's order: no training policy code runs while or after hidden episodes run;
judging finishes whoever is connected, and a restart or `judge RUN` completes it."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.store.database import Store
from tests.support.host import GOOD, SEED, charges, finish

# A training policy that is slow to start, then says on stderr (which the agent reads
# in its feedback) when it acts: were hidden episodes running by then, it could tell
# what they left behind.
LATE = """
import sys, time

def make_policy(context):
    time.sleep(1.0)
    return Late()

class Late:
    def __init__(self):
        self.steps = 0

    def act(self, observation):
        self.steps += 1
        if self.steps == 1:
            print(f"acting-at={time.time()!r}", file=sys.stderr, flush=True)
        return 1 if observation[2] + 0.3 * observation[3] > 0 else 0
"""


def _event_times(store: Store, run_id: str, kind: str) -> list[float]:
    return [e.at for e in store.events(run_id) if e.kind == kind]


def test_validation_waits_for_a_slow_training_submission_admitted_before_finalize(
    host: Host,
) -> None:
    run = host.start_run("mini").run_id
    candidate = finish(host, run, "0:2", {"policy.py": GOOD}).submission_id
    late = host.submit(run, "2:6", files={"policy.py": LATE})
    host.finalize(run, [candidate])
    assert host.wait_final(run, 120).state == "finalized"

    view = host.feedback(run, late)
    assert view.status == "complete" and view.episodes_done == 4  # nothing lost
    acted = [
        float(t)
        for e in view.episode_summaries
        for t in re.findall(r"acting-at=([0-9.]+)", e.stderr or "")
    ]
    assert len(acted) == 4, [e.stderr for e in view.episode_summaries]
    started = _event_times(host.store, run, "validation_started")
    hidden = [r.created for r in host.store.results(run)]
    assert started and len(hidden) == 2
    # Every training act happened before validation started, which came before any
    # hidden result.
    assert max(acted) < min(started) <= min(hidden)
    completed = _event_times(host.store, run, "submission_complete")
    assert max(completed) <= min(started)
    assert charges(host, run) == (6, 2, 2)


def test_a_finalizing_run_no_host_holds_is_finished_by_judge_run_once(
    data_dir: Path, tasks_dir: Path
) -> None:
    handed: list[str] = []
    # A server whose judging process never started (or died before claiming the run).
    with Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED, hand_off=handed.append) as h:
        run = h.start_run("mini").run_id
        sub = finish(h, run, "0:2", {"policy.py": GOOD}).submission_id
        h.finalize(run, [sub])
        assert handed == [run]
        time.sleep(1.0)
        assert h.store.get_run(run).state == "finalizing"  # type: ignore[union-attr]
        assert not h.store.results(run)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "evopolicy_mcp",
            "judge",
            run,
            "--data-dir",
            str(data_dir),
            "--tasks-dir",
            str(tasks_dir),
            "--timeout",
            "120",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"run {run}: finalized; selected {sub}" in proc.stdout
    store = Store(data_dir)
    try:
        assert store.get_run(run).state == "finalized"  # type: ignore[union-attr]
        assert sorted(r.split for r in store.results(run)) == ["test", "validation"]
        kinds = [e.kind for e in store.events(run)]
        assert kinds.count("validation_result") == 1 and kinds.count("test_result") == 1
    finally:
        store.close()
    # Judging again is a no-op that reports the same outcome.
    again = subprocess.run(
        [sys.executable, "-m", "evopolicy_mcp", "judge", run, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0 and again.stdout == proc.stdout


def test_a_restarted_host_judges_a_run_its_judging_process_left(
    data_dir: Path, tasks_dir: Path
) -> None:
    with Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED, hand_off=lambda _: None) as h:
        run = h.start_run("mini").run_id
        sub = finish(h, run, "0:2", {"policy.py": GOOD}).submission_id
        h.finalize(run, [sub])
    with Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED) as h:
        status = h.wait_final(run, 120)
        assert status.state == "finalized"
        assert charges(h, run) == (2, 1, 1)


def test_judge_refuses_an_open_run(data_dir: Path, tasks_dir: Path) -> None:
    with Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED) as h:
        run = h.start_run("mini").run_id
    proc = subprocess.run(
        [sys.executable, "-m", "evopolicy_mcp", "judge", run, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"evopolicy-mcp judge: run {run} is open: nothing to judge until its agent finalizes it"
    )
