"""Crafter feedback with real Crafter: reports, artifacts, what hidden splits keep."""

from __future__ import annotations

import base64
import gzip
import io
import json
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from evopolicy_mcp.adapters import protocol as adapters
from evopolicy_mcp.adapters import replay
from evopolicy_mcp.environments.crafter import report as crafter_report
from evopolicy_mcp.environments.crafter.adapter import (
    CrafterAdapter,
    CrafterEpisode,
)
from evopolicy_mcp.environments.crafter.names import ITEMS
from evopolicy_mcp.environments.crafter.report import Tally
from evopolicy_mcp.evaluation.episodes import EvaluationAborted, evaluate
from evopolicy_mcp.evaluation.loop import REPORT_CHARS
from evopolicy_mcp.evaluation.snapshot import capture
from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.host.errors import HostError
from tests.support.crafter import (
    ADAPTER,
    WOOD_AND_TABLE,
    random_actions,
)
from tests.support.kernel import TASKS, Kernel, with_parameters

# -- feedback: report, artifacts, splits -------------------------------------------------


def test_report_stays_bounded_and_shows_repeats_idling_and_confinement() -> None:
    tally = Tally(horizon=10_000)
    inventory = dict.fromkeys(ITEMS, 9)
    tally.start((5, 5), (0, 1), inventory)
    for t in range(1, 10_001):
        if t <= 3000:  # walks into a wall: same action, nothing changes
            tally.step(1, (5, 5), (-1, 0), inventory, False, ())
        else:
            tally.step(t % 17, (t % 50, t // 50), (0, 1), {**inventory, "wood": t % 10}, False, ())
    report = tally.report()
    assert len(json.dumps(report)) < REPORT_CHARS // 2
    assert 8 <= len(report["inventory_samples"]["step"]) <= 17
    assert report["inventory_samples"]["step"][-1] == 10_000
    stuck = report["stuck"]
    assert stuck["longest_repeat"] == {"action": "move_left", "from_step": 1, "steps": 3000}
    assert stuck["longest_without_effect"]["steps"] >= 2999
    assert stuck["confined_windows"] == 30 and stuck["windows"] == 100
    assert report["end"] == "time_limit" and report["actions"]["move_left"] > 3000


def test_artifacts_replay_the_episode_within_their_size_limits() -> None:
    from PIL import Image

    episode = ADAPTER.make_episode({"length": 500}, 11)
    episode.reset()
    for action in random_actions(11, 500):
        step = episode.step(action)
        if step.terminated or step.truncated:
            break
    steps = episode._game.steps
    files = episode.artifacts()
    assert set(files) == {"trajectory.jsonl.gz", "replay.gif"}
    lines = [json.loads(x) for x in gzip.decompress(files["trajectory.jsonl.gz"]).splitlines()]
    assert lines[0]["format"] == "crafter-trajectory/1" and lines[0]["steps"] == steps
    assert [x["t"] for x in lines[1:]] == list(range(1, steps + 1))
    assert lines[-1]["v"][0] == episode._game.player.health
    assert "seed" not in json.dumps(lines[0])
    gif = Image.open(io.BytesIO(files["replay.gif"]))
    limit = crafter_report.GIF_FRAMES + crafter_report.LAST_FRAMES + 2
    assert gif.size == (64, 64) and 2 <= getattr(gif, "n_frames", 0) <= limit
    assert len(files["replay.gif"]) <= replay.GIF_BYTES
    assert len(files["trajectory.jsonl.gz"]) <= crafter_report.TRAJECTORY_BYTES


def test_a_replay_that_exceeds_the_gif_limit_keeps_fewer_frames(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from PIL import Image

    monkeypatch.setattr(replay, "GIF_BYTES", 40_000)
    episode = ADAPTER.make_episode({"length": 200}, 12)
    episode.reset()
    for action in random_actions(12, 200):
        if episode.step(action).terminated:
            break
    gif = episode.artifacts()["replay.gif"]
    assert len(gif) <= 40_000 and getattr(Image.open(io.BytesIO(gif)), "n_frames", 0) >= 2


def test_hand_written_wood_and_table_policy_scores_clearly_above_the_baseline(
    kernel: Kernel, tmp_path: Path
) -> None:
    task = with_parameters("crafter", length=300)
    baseline = kernel.evaluate(capture(task.baseline_dir, tmp_path), task, 6, workers=None)
    crafted = kernel.evaluate(WOOD_AND_TABLE, task, 6, workers=None)
    assert baseline.failures == {} and crafted.failures == {}
    assert crafted.metrics["mean_achievement_place_table"] >= 0.5
    assert crafted.metrics["mean_achievement_make_wood_pickaxe"] >= 0.5
    assert baseline.metrics["mean_achievement_place_table"] == 0.0
    assert baseline.score is not None and crafted.score is not None
    assert crafted.score > 1.5 * baseline.score, (crafted.score, baseline.score)


def test_training_feedback_has_reports_and_artifacts_and_hidden_splits_have_neither(
    kernel: Kernel,
) -> None:
    task = with_parameters("crafter-survival", length=120)
    program = kernel.program(WOOD_AND_TABLE)
    saved: list[tuple[int, str, int]] = []

    def keep(index: int, name: str, data: bytes) -> None:
        saved.append((index, name, len(data)))

    jobs = kernel.jobs(task, [3, 5, 8])
    training = evaluate(program, task, jobs, runner=kernel.runner, workers=1, artifacts=keep)
    assert all(s.report is not None and s.report["end"] for s in training.episodes)
    assert sorted((i, n) for i, n, _ in saved) == [
        (i, n) for i in (3, 5) for n in ("replay.gif", "trajectory.jsonl.gz")
    ]
    assert [t.artifacts for t in training.traces] == [["replay.gif", "trajectory.jsonl.gz"]] * 2
    assert training.score is not None and training.score > 0
    saved.clear()
    hidden = evaluate(
        program,
        task,
        kernel.jobs(task, 3, split="validation"),
        runner=kernel.runner,
        workers=1,
        traces=False,
        artifacts=keep,
    )
    assert saved == [] and hidden.traces == []
    assert all(s.report is None for s in hidden.episodes)
    assert 'report": {' not in hidden.model_dump_json()


def test_a_run_stores_artifacts_of_training_episodes_only(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    text = TASKS["crafter"].source.read_text()  # type: ignore[union-attr]
    text = text.replace('id = "crafter"', 'id = "crafter-mini"').replace(
        "length = 10000", "length = 60"
    )
    text = text.replace(
        'baseline = "baselines/crafter"',
        f"baseline = {json.dumps(str(TASKS['crafter'].baseline_dir))}",
    )
    for key, value in (
        ("episodes = 256", "episodes = 8"),
        ("submissions = 24", "submissions = 4"),
        ("per_submission = 32", "per_submission = 4"),
        ("pool = 128", "pool = 8"),
        ("episodes = 64", "episodes = 2"),
        ("episodes = 128", "episodes = 2"),
    ):
        text = text.replace(key, value)
    (tasks / "crafter-mini.toml").write_text(text)
    with Host(tmp_path / "data", tasks_dirs=[tasks], seed=3) as host:
        run = host.start_run("crafter-mini").run_id
        sub = host.submit(run, "0:3", files={"policy.py": textwrap.dedent(WOOD_AND_TABLE)})
        view = host.wait(run, sub, 120)
        assert view.status == "complete", view
        # A page leaves reports to each episode's own view, which carries it.
        assert all(e.report is None for e in view.episode_summaries)
        assert all(
            host.feedback(run, sub, episode=i).episode_summaries[0].report is not None
            for i in range(3)
        )
        assert host.store.list_artifacts(run, sub) == [
            f"episode-{i}/{name}" for i in (0, 1) for name in ("replay.gif", "trajectory.jsonl.gz")
        ]
        # The agent reads them through a resource; an unknown name is a clear error.
        traced = host.feedback(run, sub, episode=0).traces[0]
        assert traced.artifacts == ["replay.gif", "trajectory.jsonl.gz"]
        files = f"evopolicy://runs/{run}/submissions/{sub}/episodes/0/files"
        gif, gif_type = anyio.run(_read_blob, host, f"{files}/replay.gif")
        assert gif.startswith(b"GIF8") and gif_type == "image/gif"
        steps, steps_type = anyio.run(_read_blob, host, f"{files}/trajectory.jsonl.gz")
        assert gzip.decompress(steps).startswith(b"{") and steps_type == "application/gzip"
        with pytest.raises(HostError, match="no artifact"):
            host.artifact(run, sub, 2, "replay.gif")  # episode 2 was not traced
        host.finalize(run, [sub])
        assert host.wait_final(run, 120).state == "finalized"
        run_dir = host.store.run_dir(run)
        found = sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("artifacts"))
        assert found == [f"submissions/{sub}/artifacts"]
        for split in ("validation", "test"):
            stored = json.loads(host.store.result_path(run, split, sub).read_text())
            assert stored["traces"] == [] and all(e["report"] is None for e in stored["episodes"])


class OversizedReport(CrafterEpisode):
    def report(self) -> dict[str, Any]:
        return {"text": "x" * REPORT_CHARS}


class EscapingArtifact(CrafterEpisode):
    def artifacts(self) -> dict[str, bytes]:
        return {"../../outside": b"x"}


@pytest.mark.parametrize("episode", [OversizedReport, EscapingArtifact])
def test_a_report_or_artifact_beyond_its_bounds_is_an_adapter_fault(
    kernel: Kernel, episode: type[CrafterEpisode], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Faulty(CrafterAdapter):
        name = "crafter-faulty"

        def make_episode(self, parameters: Any, seed: int) -> CrafterEpisode:
            made = super().make_episode(parameters, seed)
            made.__class__ = episode
            return made

    monkeypatch.setitem(adapters._loaded, Faulty.name, Faulty())
    task = with_parameters("crafter", length=20).model_copy(update={"adapter": Faulty.name})
    program = kernel.program(WOOD_AND_TABLE)
    with pytest.raises(EvaluationAborted, match="adapter fault"):
        evaluate(program, task, kernel.jobs(task, 1), runner=kernel.runner, artifacts=print)


async def _read_blob(host: Host, uri: str) -> tuple[bytes, str]:
    """A file resource's bytes and the media type it is served with."""
    from mcp import Client

    from evopolicy_mcp.server.app import build_server

    async with Client(build_server(host)) as client:
        result = await client.read_resource(uri)
    content = result.contents[0]
    return base64.b64decode(content.blob), str(content.mime_type)  # type: ignore[union-attr]
