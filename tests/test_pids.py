"""The process-count limit: a fork bomb in a policy stops at the runner's cap (real processes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_support import Kernel, with_limits

from evopolicy_mcp.pids import pids_root
from evopolicy_mcp.runner import Runner

pytestmark = pytest.mark.skipif(pids_root() is None, reason="no writable pids cgroup here")

LIMIT = 48
# Bounded on purpose: at most 300 forks even if the limit does not hold.
BOMB = """
import os, time

def make_policy(context):
    made = 0
    for _ in range(300):
        try:
            pid = os.fork()
        except OSError as exc:
            print(f"fork failed: {exc!r}")
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        made += 1
    print(f"forked {made}")
    return Policy()

class Policy:
    def act(self, observation):
        return 0
"""


def test_a_fork_bomb_stops_at_the_process_limit_and_the_next_episode_runs(tmp_path: Path) -> None:
    kernel = Kernel(tmp_path / "store", Runner(max_processes=LIMIT))
    runner = kernel.runner
    try:
        task = with_limits("cartpole", startup_seconds=30.0)
        feedback = kernel.hostile(BOMB, task, 2)
        assert runner.process_limit == LIMIT
        made = []
        for episode in feedback.episodes:
            assert episode.status == "ok", episode
            made.append(int((episode.stderr or "").split("forked ")[1].split()[0]))
        # The cap is the server's: the template, a spare and an ended episode's leftovers
        # still being swept count too, so a later episode may get fewer.
        assert 0 < made[0] < LIMIT and all(m < LIMIT for m in made), made
        runner.settle()
    finally:
        kernel.close()
