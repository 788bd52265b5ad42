"""Shared pieces of the host tests: policies, a small task, helpers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evopolicy_mcp.host.authority import Host, HostError
from evopolicy_mcp.host.views import SubmissionView
from evopolicy_mcp.tasks.model import BUILTIN_TASKS_DIR

SEED = 33
BASELINE_DIR = BUILTIN_TASKS_DIR / "baselines" / "random"

GOOD = """
def make_policy(context):
    return Balancer()

class Balancer:
    def act(self, observation):
        return 1 if observation[2] + 0.3 * observation[3] > 0 else 0
"""
RANDOM = """
import random

def make_policy(context):
    return Coin(random.Random(context.policy_seed))

class Coin:
    def __init__(self, rng):
        self.rng = rng

    def act(self, observation):
        return self.rng.randrange(2)
"""
CRASH = """
def make_policy(context):
    return Crasher()

class Crasher:
    def act(self, observation):
        raise ValueError("deliberate crash")
"""
SLOW = """
import time

def make_policy(context):
    time.sleep({delay})
    return Balancer()

class Balancer:
    def act(self, observation):
        return 1 if observation[2] + 0.3 * observation[3] > 0 else 0
"""


def slow(delay: float) -> dict[str, str]:
    return {"policy.py": SLOW.format(delay=delay)}


def write_task(
    directory: Path,
    task_id: str = "mini",
    *,
    episodes: int = 12,
    submissions: int = 6,
    per_submission: int = 4,
    pool: int = 8,
    validation: int = 3,
    candidates: int = 2,
    assessment: int = 3,
    wall_seconds: float | None = None,
    direction: str = "maximize",
    env_id: str = "CartPole-v1",
    finish: str = "early",
    extra: str = "",
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    wall = f"wall_seconds = {wall_seconds}\n" if wall_seconds is not None else ""
    (directory / f"{task_id}.toml").write_text(
        f"""
id = "{task_id}"
title = "CartPole with a small budget"
summary = "CartPole-v1 for host tests."
description = "Balance the pole."
adapter = "gymnasium"
baseline = {json.dumps(str(BASELINE_DIR))}
{extra}

[parameters]
env_id = "{env_id}"

[score]
metric = "return"
aggregate = "mean"
direction = "{direction}"
failure_value = 0.0

[budget]
episodes = {episodes}
submissions = {submissions}
per_submission = {per_submission}
pool = {pool}
finish = "{finish}"
{wall}
[validation]
episodes = {validation}
candidates = {candidates}

[assessment]
episodes = {assessment}
"""
    )
    return directory


def finish(host: Host, run_id: str, episodes: str, files: dict[str, str]) -> SubmissionView:
    sub_id = host.submit(run_id, episodes, files=files)
    view = host.wait(run_id, sub_id, 60)
    assert view.status == "complete", view
    return view


def charges(host: Host, run_id: str) -> tuple[int, int, int]:
    status = host.run_status(run_id)
    return status.episodes_used, status.submissions_used, len(host.store.list_submissions(run_id))


def rejected(call, code: str) -> HostError:  # type: ignore[no-untyped-def]
    with pytest.raises(HostError) as info:
        call()
    assert info.value.code == code, info.value.message
    return info.value
