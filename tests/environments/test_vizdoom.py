"""ViZDoom on the kit: actions described by the buttons they hold, how an episode ended."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vizdoom", reason="the [vizdoom] extra is not installed")

from evopolicy_mcp.adapters.protocol import load_adapter  # noqa: E402

VIZDOOM = load_adapter("vizdoom")


def scenario(name: str) -> dict:
    return {"env_id": f"Vizdoom{name}-v1", "kwargs": {"frame_skip": 4}}


def test_each_action_value_is_described_by_the_buttons_it_holds() -> None:
    spec = VIZDOOM.spec(scenario("Basic"))
    assert spec.action_space["meanings"] == [
        "do nothing",
        "fire the weapon",
        "step right",
        "step left",
    ]
    assert spec.metadata["buttons"] == ["MOVE_LEFT", "MOVE_RIGHT", "ATTACK"]
    variables = spec.observation_space["spaces"]["gamevariables"]["components"]
    assert [v["name"] for v in variables] == ["ammo2"]
    assert spec.max_steps == 75


def test_a_doom_episode_writes_no_settings_file_where_the_host_runs(tmp_path: Path) -> None:
    # The engine writes its settings when it stops, at the latest when the process ends
    # (reused engines stay up until then): play one in a process of its own.
    play = (
        "from evopolicy_mcp.adapters.protocol import load_adapter\n"
        "e = load_adapter('vizdoom').make_episode("
        "{'env_id': 'VizdoomBasic-v1', 'kwargs': {'frame_skip': 4}}, 3)\n"
        "e.reset(); e.step(1); e.close()\n"
    )
    subprocess.run([sys.executable, "-c", play], cwd=tmp_path, check=True, timeout=120)
    assert not (tmp_path / "_vizdoom.ini").exists()


@pytest.mark.parametrize(("name", "end"), [("Basic", "timeout"), ("TakeCover", "died")])
def test_the_report_says_how_a_doom_episode_ended(name: str, end: str) -> None:
    episode = VIZDOOM.make_episode(scenario(name), 1)
    episode.reset()
    steps = 0
    while True:
        step = episode.step(0)  # do nothing: Basic times out, TakeCover's fireballs hit
        steps += 1
        if step.terminated or step.truncated:
            break
    report, metrics = episode.report(), episode.metrics()
    episode.close()
    assert report is not None and report["end"] == end
    assert report["actions"] == {"do nothing": steps} and report["kills"] == 0
    assert metrics["died"] == float(end == "died")
