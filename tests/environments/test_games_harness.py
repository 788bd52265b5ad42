"""Every contest problem and puzzle through the kit and the real harness: check-adapter on each
game, and each game's baseline evaluated in a real sandboxed policy process."""

from __future__ import annotations

from pathlib import Path

import pytest

from evopolicy_mcp.adapters.conformance import check_adapter, render
from evopolicy_mcp.evaluation.snapshot import capture
from evopolicy_mcp.tasks.model import Task
from tests.support.kernel import TASKS, Kernel, with_parameters

GAMES = [
    ("contests", game)
    for game in (
        "ahc007", "ahc015", "ahc046", "ahc054", "ahc058", "codechef-minesweeper"
    )
] + [
    ("puzzles", game)
    for game in (
        "2048", "binpacking", "cube", "cvrp", "jobshop", "knapsack", "maze", "minesweeper",
        "sliding", "snake", "sudoku", "tetris", "tsp",
    )
]  # fmt: skip

# The smallest task of each game, shortened where its episodes are long.
SHORT: dict[str, dict[str, int]] = {"puzzles/tetris-10x20": {"pieces": 40}}


def tasks_of(family: str, game: str) -> list[Task]:
    """The tasks playing ``game``, the smallest first (by the sum of their size parameters)."""
    found = [t for t in TASKS.values() if t.adapter == family and t.parameters.get("game") == game]
    assert found, f"no task plays {family} game {game}"
    return sorted(found, key=lambda t: sum(v for v in t.parameters.values() if type(v) is int))


@pytest.mark.parametrize(("family", "game"), GAMES, ids=[g for _, g in GAMES])
def test_check_adapter_passes_on_every_game(family: str, game: str) -> None:
    parameters = tasks_of(family, game)[0].parameters
    checks = check_adapter(family, dict(parameters), steps=100)
    assert all(c.ok for c in checks), render(checks)


@pytest.mark.parametrize(("family", "game"), GAMES, ids=[g for _, g in GAMES])
def test_the_baseline_of_every_game_evaluates_in_the_harness(
    kernel: Kernel, tmp_path: Path, family: str, game: str
) -> None:
    task = tasks_of(family, game)[0]
    task = with_parameters(task, **SHORT.get(task.id, {}))
    feedback = kernel.evaluate(capture(task.baseline_dir, tmp_path), task, 1)
    episode = feedback.episodes[0]
    assert episode.status == "ok", (episode.failure, episode.message, episode.traceback)
    assert episode.metrics["invalid"] == 0.0 and episode.steps >= 1
    if task.score.direction == "maximize":
        assert episode.metrics["score"] > 0 and feedback.score == episode.metrics["score"]
    else:
        assert 0 < episode.metrics["score"] == feedback.score < task.score.failure_value


@pytest.mark.exhaustive
@pytest.mark.parametrize(
    "task",
    [t for family, game in GAMES for t in tasks_of(family, game)],
    ids=lambda t: t.id,
)
def test_check_adapter_passes_on_every_variant(task: Task) -> None:
    checks = check_adapter(task.adapter, dict(task.parameters), steps=200)
    assert all(c.ok for c in checks), render(checks)
