"""ViZDoom on the kit: actions described by the buttons they hold, how an episode ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
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


def test_a_doom_episode_writes_nothing_where_the_host_runs(tmp_path: Path) -> None:
    # The engine writes its settings when it stops, at the latest when the process ends
    # (reused engines stay up until then): play an episode and its replay in a process of
    # its own. The engine also makes an empty `_vizdoom/` folder where it starts, a path
    # in its own code; worker processes run in a folder of their own for that
    # (docs/authoring.md), the thread executor's host leaves it in its folder.
    play = (
        "from evopolicy_mcp.adapters.protocol import load_adapter\n"
        "e = load_adapter('vizdoom').make_episode("
        "{'env_id': 'VizdoomBasic-v1', 'kwargs': {'frame_skip': 4}}, 3)\n"
        "e.reset(); e.step(1); assert e.artifacts(); e.close()\n"
    )
    subprocess.run([sys.executable, "-c", play], cwd=tmp_path, check=True, timeout=120)
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["_vizdoom"])
    assert not any((tmp_path / "_vizdoom").glob("**/*"))


def _engines() -> set[int]:
    """Live Doom engine processes started from this interpreter's packages."""
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                argv0 = Path(entry.path, "cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if argv0.endswith(b"/vizdoom/vizdoom") and argv0.startswith(sys.prefix.encode()):
                found.add(int(entry.name))
    return found


def test_doom_episodes_on_worker_processes_leave_nothing_behind(tmp_path: Path) -> None:
    # Worker processes run in "/": an engine started there made "/_vizdoom/"; and the
    # engines of a worker's reused environments outlived the command (orphans holding
    # its stderr, so a caller reading it never saw its end).
    before, engines = os.path.lexists("/_vizdoom"), _engines()
    try:
        subprocess.run(
            [sys.executable, "-m", "evopolicy_mcp", "evaluate", "--task", "vizdoom/basic"]
            + ["--episodes", "2", "--executor", "process", "--workers", "1", "--json"],
            cwd=tmp_path,
            check=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1)
        left = _engines() - engines
        assert sorted(p.name for p in tmp_path.iterdir()) == []
        assert not left, f"Doom engines outlived the command: {sorted(left)}"
        if not before:
            assert not os.path.lexists("/_vizdoom")
    finally:
        for pid in _engines() - engines:
            os.kill(pid, signal.SIGKILL)
        if not before and os.path.isdir("/_vizdoom"):
            os.rmdir("/_vizdoom")


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
