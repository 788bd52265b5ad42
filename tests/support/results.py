"""Shared pieces of the results tests: tasks with stated references, finished runs."""

from __future__ import annotations

import json
from pathlib import Path

from evopolicy_mcp.host.authority import Host
from tests.support.host import write_task

CRAFTER_BASELINE = Path(__file__).resolve().parents[2] / (
    "evopolicy_mcp/tasks/builtin/baselines/crafter"
)


def write_reference_task(
    directory: Path, task_id: str, *, baseline: float, reference: float, **kw: object
) -> Path:
    """``write_task`` with a stated baseline and reference score."""
    write_task(directory, task_id, **kw)  # type: ignore[arg-type]
    path = directory / f"{task_id}.toml"
    text = path.read_text().replace(
        "failure_value = 0.0",
        f"failure_value = 0.0\nbaseline_score = {baseline}\nreference_score = {reference}\n"
        'reference = "stated for the tests"',
    )
    path.write_text(text)
    return directory


def write_crafter_task(directory: Path, task_id: str = "crafter-short") -> Path:
    """Crafter with 150-step episodes and tiny hidden splits: replays in seconds."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{task_id}.toml").write_text(
        f"""
id = "{task_id}"
title = "Crafter, short"
summary = "Crafter for the results tests."
description = "Unlock achievements."
adapter = "crafter"
baseline = {json.dumps(str(CRAFTER_BASELINE))}
trace_episodes = 1
trace_steps = 10

[parameters]
observation = "symbolic"
length = 150

[score]
metric = "achievements"
aggregate = "crafter"
direction = "maximize"
failure_value = 0.0

[budget]
episodes = 8
submissions = 4
per_submission = 2
pool = 4

[validation]
episodes = 1
candidates = 2

[assessment]
episodes = 1

[limits]
episode_seconds = 60.0
"""
    )
    return directory


def finished_run(
    host: Host, task_id: str, programs: list[tuple[str, dict[str, str]]], candidates: list[int]
) -> tuple[str, list[str]]:
    """A run with one submission per (selector, files), finalized with the submissions at
    positions ``candidates``; returns the run id and the submission ids."""
    run = host.start_run(task_id)
    subs = []
    for selector, files in programs:
        sid = host.submit(run.run_id, selector, files=files)
        assert host.wait(run.run_id, sid, 120).status == "complete"
        subs.append(sid)
    host.finalize(run.run_id, [subs[i] for i in candidates])
    host.wait_final(run.run_id, 120)
    return run.run_id, subs
