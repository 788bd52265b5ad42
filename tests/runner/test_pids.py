"""The process-count limit: a fork bomb in a policy stops at the runner's cap (real processes)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from evopolicy_mcp.evaluation.feedback import EpisodeSummary
from evopolicy_mcp.kernel import cgroups
from evopolicy_mcp.kernel.cgroups import MAX_FREE_GROUPS, hierarchies
from evopolicy_mcp.kernel.confine import ProcessLimits
from evopolicy_mcp.kernel.zygote import SPARES
from evopolicy_mcp.runner.template import Runner
from tests.support.kernel import GOOD_CARTPOLE, Kernel, with_limits

pytestmark = pytest.mark.skipif(
    not any("pids" in h.controllers for h in hierarchies()), reason="no writable pids cgroup here"
)

LIMIT = 48


def bomb(hold: float = 0.0) -> str:
    """A policy that forks until refused (bounded on purpose: at most 300 forks even if no
    limit holds), keeps its children for ``hold`` seconds, then plays."""
    return f"""
import os, time

def make_policy(context):
    made = 0
    for _ in range(300):
        try:
            pid = os.fork()
        except OSError as exc:
            print(f"fork failed: {{exc!r}}")
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        made += 1
    print(f"forked {{made}} at {{time.time()}}", flush=True)
    time.sleep({hold})
    return Policy()

class Policy:
    def act(self, observation):
        return 0
"""


BOMB = bomb()


def forked(summary: EpisodeSummary) -> tuple[int, float]:
    """How many children a bomb made, and when it had them all."""
    words = (summary.stderr or "").split("forked ")[1].split()
    return int(words[0]), float(words[2])


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
            made.append(forked(episode)[0])
        # The cap is the server's: the template, a spare and an ended episode's leftovers
        # still being swept count too, so a later episode may get fewer.
        assert 0 < made[0] < LIMIT and all(m < LIMIT for m in made), made
        runner.settle()
    finally:
        kernel.close()


def runner_tree(runner: Runner) -> dict[str, list[str]]:
    """The runner's cgroups, by hierarchy: the groups below its tree."""
    assert runner.template_pid is not None
    name = f"evopolicy-{os.getpid()}-{runner.template_pid}"
    found = {}
    for h in hierarchies():
        base = h.root / name
        if base.is_dir():
            found[h.root.name] = sorted(p.name for p in base.iterdir() if p.is_dir())
    return found


def test_a_fork_bomb_in_one_episode_leaves_a_concurrent_episode_room_to_start(
    tmp_path: Path,
) -> None:
    # Without a cap per episode the bomb would take the whole runner's 160 processes.
    kernel = Kernel(tmp_path / "store", Runner(max_processes=160))
    cap = ProcessLimits().processes
    try:
        bombs: list[EpisodeSummary] = []
        task = with_limits("cartpole", startup_seconds=30.0)
        thread = threading.Thread(
            target=lambda: bombs.extend(kernel.evaluate(bomb(hold=1.5), task, 2).episodes)
        )
        thread.start()
        neighbours: list[tuple[float, EpisodeSummary]] = []
        try:
            while thread.is_alive() or not neighbours:
                good = kernel.only(GOOD_CARTPOLE, "cartpole")
                neighbours.append((time.time(), good))
        finally:
            thread.join()
        for bombed in bombs:
            assert bombed.status == "ok", bombed
            assert 0 < forked(bombed)[0] < cap, bombed.stderr
        for _when, good in neighbours:
            assert (good.status, good.episode_return) == ("ok", 500.0), good
        held = [forked(b)[1] for b in bombs]
        assert any(h <= when <= h + 1.5 for h in held for when, _ in neighbours), (
            "no neighbour ran while a bomb held its processes"
        )
    finally:
        kernel.close()


def test_episode_cgroups_are_reused_or_removed_and_do_not_pile_up(tmp_path: Path) -> None:
    kernel = Kernel(tmp_path / "store")
    runner = kernel.runner
    episodes = 2 * MAX_FREE_GROUPS
    try:
        for _ in range(episodes):
            kernel.assert_healthy()
        runner.settle()
        time.sleep(0.2)  # the template, idle, empties the last episode's groups
        tree = runner_tree(runner)
        # Left: the template's own group (pids), the idle spares', and emptied groups kept
        # for the next spares; not one per episode.
        assert tree, tree
        for groups in tree.values():
            assert len(set(groups) - {"template"}) <= SPARES + MAX_FREE_GROUPS < episodes, tree
        template = runner.template_pid
    finally:
        kernel.close()
    assert template is not None
    assert cgroups.runner_processes(os.getpid(), template) is None
    assert runner_tree_gone(template)


def runner_tree_gone(template: int) -> bool:
    name = f"evopolicy-{os.getpid()}-{template}"
    return not any((h.root / name).exists() for h in hierarchies())
