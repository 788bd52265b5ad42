"""Host crash recovery and operator commands, over real SQLite files and processes."""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from evopolicy_mcp.cli.operator import cmd_report, cmd_runs
from evopolicy_mcp.evaluation.snapshot import capture_files
from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.store.database import Store
from tests.support.host import (
    GOOD,
    RANDOM,
    SEED,
    SLOW,
    charges,
    finish,
    rejected,
    slow,
)

# ------------------------------------------------------------------ crash recovery


def test_an_evaluating_submission_is_rerun_on_restart_and_charged_once(
    data_dir: Path, tasks_dir: Path
) -> None:
    with Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED) as h:
        run = h.start_run("mini").run_id
    # What a host that died mid-evaluation leaves behind: a charged, evaluating row.
    store = Store(data_dir)
    program = capture_files({"policy.py": GOOD}, store.programs_dir)
    sub = store.reserve(
        run,
        selector="0:3",
        indices=[0, 1, 2],
        program={"digest": program.digest, "files": list(program.files), "size": program.size},
    )
    store.mark_evaluating(run, sub.id)
    store.close()
    with Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED) as h:
        view = h.wait(run, sub.id, 60)
        assert view.status == "complete" and view.score == 500.0
        assert charges(h, run) == (3, 1, 1)
        kinds = [e.kind for e in h.store.events(run)]
        assert kinds.count("submission_resumed") == 1
        assert kinds.count("submission_reserved") == 1
    with Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED) as h:
        assert charges(h, run) == (3, 1, 1)
        assert [e.kind for e in h.store.events(run)].count("submission_resumed") == 1


def test_closing_the_host_leaves_unfinished_work_for_the_next_start(
    data_dir: Path, tasks_dir: Path
) -> None:
    first = Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED, close_timeout=0.0)
    run = first.start_run("mini").run_id
    sub = first.submit(run, "0:2", files=slow(0.5))
    first.close()
    with Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED) as h:
        view = h.wait(run, sub, 60)
        assert view.status == "complete" and view.score == 500.0
        assert charges(h, run) == (2, 1, 1)


_CRASHING_HOST = """
import sys, time
from pathlib import Path
from evopolicy_mcp.host.authority import Host
host = Host(Path(sys.argv[1]), tasks_dirs=[sys.argv[2]], seed=11)
run = host.start_run("mini").run_id
sub = host.submit(run, "0:4", files={"policy.py": sys.argv[3]})
print(run, sub, flush=True)
time.sleep(60)
"""


def test_a_host_killed_mid_evaluation_resumes_the_submission(
    data_dir: Path, tasks_dir: Path
) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _CRASHING_HOST,
            str(data_dir),
            str(tasks_dir),
            SLOW.format(delay=0.5),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        run, sub = proc.stdout.readline().split()
        store = Store(data_dir)
        deadline = time.monotonic() + 20
        while store.get_submission(run, sub).state != "evaluating":  # type: ignore[union-attr]
            assert time.monotonic() < deadline
            time.sleep(0.02)
        store.close()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    with Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED) as h:
        view = h.wait(run, sub, 60)
        assert view.status == "complete" and view.episodes_done == 4
        assert charges(h, run) == (4, 1, 1)


def test_an_interrupted_finalize_completes_on_restart(data_dir: Path, tasks_dir: Path) -> None:
    with Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED) as h:
        run = h.start_run("mini").run_id
        good = finish(h, run, "0", {"policy.py": GOOD}).submission_id
        coin = finish(h, run, "0", {"policy.py": RANDOM}).submission_id
    # A host that died after closing the run and committing one validation result.
    store = Store(data_dir)
    store.begin_finalize(run, [good, coin])
    store.save_result(
        run,
        good,
        "validation",
        episodes=3,
        score=123.0,
        policy_failures=0,
        failures={},
        feedback_json="{}",
    )
    store.close()
    with Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED) as h:
        rejected(lambda: h.submit(run, "1", files={"policy.py": GOOD}), "run_closed")
        assert h.wait_final(run, 120).state == "finalized"
        report = h.report(run)
    validation = {v.submission_id: v.score for v in report.validation}
    assert validation[good] == 123.0  # committed work is not redone
    assert validation[coin] is not None and validation[coin] < 123.0
    assert report.selected == good and report.assessment is not None


# ------------------------------------------------------------------ operator commands


def test_operator_commands_print_runs_and_full_reports(host: Host) -> None:
    run = host.start_run("mini").run_id
    good = finish(host, run, "0", {"policy.py": GOOD}).submission_id
    host.finalize(run, [good])
    host.wait_final(run, 120)
    out, err = io.StringIO(), io.StringIO()
    args = argparse.Namespace(data_dir=str(host.data_dir), json=False)
    assert cmd_runs(args, out, err) == 0
    assert run in out.getvalue() and "finalized" in out.getvalue()
    out = io.StringIO()
    args = argparse.Namespace(data_dir=str(host.data_dir), run_id=run, json=True)
    assert cmd_report(args, out, err) == 0
    report = json.loads(out.getvalue())
    assert report["selected"] == good and report["validation"][0]["episodes"] == 3
    assert report["reproducibility"]["packages"]["gymnasium"]
    assert report["reproducibility"]["submissions"][0]["selector"] == "0"
    assert host.store.get_run(run).secret.hex() not in out.getvalue()  # type: ignore[union-attr]
    out = io.StringIO()
    args = argparse.Namespace(data_dir=str(host.data_dir), run_id=run, json=False)
    assert cmd_report(args, out, err) == 0 and "assessment" in out.getvalue()
    args = argparse.Namespace(data_dir=str(host.data_dir), run_id="nope", json=False)
    assert cmd_report(args, io.StringIO(), err) == 1 and "no run" in err.getvalue()
