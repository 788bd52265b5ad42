"""NetHack and MiniHack on the kit: seeding, the episode report, the text replay."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pytest

pytest.importorskip("nle", reason="the [nethack] extra is not installed")
pytest.importorskip("minihack", reason="the [nethack] extra is not installed")

from evopolicy_mcp.adapters.protocol import load_adapter  # noqa: E402
from evopolicy_mcp.environments.nethack.replay import FRAMES, LAST_FRAMES  # noqa: E402
from evopolicy_mcp.evaluation.loop import REPORT_CHARS  # noqa: E402

SCORE = {"env_id": "NetHackScore-v0", "kwargs": {"fix_moon_phase": True}}
ROOM = {"env_id": "MiniHack-Room-5x5-v0", "kwargs": {"fix_moon_phase": True}}
NETHACK = load_adapter("nethack")
MINIHACK = load_adapter("minihack")
# Compass moves in the navigation tasks' action order: N E S W NE SE SW NW (dy, dx).
MOVES = [(-1, 0), (0, 1), (1, 0), (0, -1), (-1, 1), (1, 1), (1, -1), (-1, -1)]


def run(adapter: Any, parameters: dict[str, Any], seed: int, choose: Any, limit: int = 6000):
    episode = adapter.make_episode(parameters, seed)
    obs, steps = episode.reset(), 0
    while steps < limit:
        step = episode.step(choose(obs))
        obs, steps = step.observation, steps + 1
        if step.terminated or step.truncated:
            break
    return episode, obs, steps


def test_nle_s_reset_seed_does_not_seed_nethack_but_the_adapter_does() -> None:
    import gymnasium

    firsts = []
    for _ in range(2):
        env = gymnasium.make("NetHackScore-v0")
        firsts.append(env.reset(seed=11)[0]["glyphs"].copy())
        env.close()
    assert not np.array_equal(*firsts)  # the trap: two different dungeons from one seed
    maps = []
    for _ in range(2):
        episode = NETHACK.make_episode(SCORE, 11)
        maps.append(episode.reset()["glyphs"].copy())
        episode.close()
    assert np.array_equal(*maps)


def test_a_death_is_reported_with_nethack_s_own_message_and_the_text_replay_shows_it() -> None:
    rng = random.Random(0)
    episode, _, steps = run(NETHACK, SCORE, 5, lambda obs: rng.randrange(23))
    files = episode.artifacts()
    report = episode.report()
    metrics = episode.metrics()
    episode.close()
    assert report is not None and report["end"] == "death", report
    assert report["death"] == "died of starvation" and report["how"] == "starving"
    assert metrics["died"] == 1.0 and metrics["success"] == 0.0
    assert metrics["score"] == report["final"]["score"] == report["samples"]["score"][-1]
    assert report["samples"]["step"][-1] == steps and len(report["samples"]["step"]) <= 17
    assert sum(report["actions"].values()) == steps and len(report["actions"]) == 23
    assert len(json.dumps(report)) < REPORT_CHARS
    replay = files["replay.txt"].decode("latin-1")
    headers = [line for line in replay.splitlines() if line.startswith("=== step")]
    assert len(headers) <= FRAMES + LAST_FRAMES + 1 and headers[-1].startswith(f"=== step {steps}:")
    assert "starved" in replay.split("=== step")[-1]  # the last frame: NetHack's own end screen
    lines = files["trajectory.tsv"].decode("latin-1").splitlines()
    assert len(lines) == steps + 1 and all(len(line.split("\t")) == 9 for line in lines)
    assert lines[1].split("\t")[0] == "1" and "replay" not in report  # replayed to the same end


def test_signs_of_being_stuck_show_a_prompt_loop() -> None:
    episode, _, steps = run(NETHACK, SCORE, 2, lambda obs: 20, limit=200)  # kick, forever
    report = episode.report()
    episode.close()
    assert report is not None and steps == 200 and report["end"] == "stopped"
    stuck = report["stuck"]
    assert stuck["longest_repeat"] == {"action": "kick", "from_step": 1, "steps": 200}
    assert stuck["steps_without_game_time"] > 150
    assert any("direction" in m for m in report["common_messages"])


def test_walking_to_the_stairs_in_a_minihack_room_is_a_success() -> None:
    def towards_stairs(obs: Any) -> int:
        chars = obs["chars"]
        me, goal = (np.argwhere(chars == ord(c)) for c in "@>")
        if not len(me) or not len(goal):
            return 0
        dy, dx = np.sign(goal[0] - me[0])
        return MOVES.index((int(dy), int(dx))) if (dy, dx) != (0, 0) else 0

    episode, _, steps = run(MINIHACK, ROOM, 3, towards_stairs)
    metrics, report = episode.metrics(), episode.report()
    episode.close()
    assert metrics["success"] == 1.0 and metrics["died"] == 0.0
    assert report is not None and report["end"] == "task_successful" and steps <= 8


def test_nethack_actions_are_described_by_their_keys() -> None:
    spec = NETHACK.spec(SCORE)
    meanings = spec.action_space["meanings"]
    assert len(meanings) == 23
    assert meanings[0].startswith("Enter") and "(key k)" in meanings[1]
    assert "search" in meanings[22] and spec.metadata["action_keys"][17:19] == ["up", "down"]
    blstats = spec.observation_space["spaces"]["blstats"]["components"]
    assert [c["name"] for c in blstats][9:13] == ["score", "hitpoints", "max_hitpoints", "depth"]


def test_a_reused_environment_s_end_screen_shows_no_other_episode_s_game() -> None:
    keys = ["tty_chars", "blstats", "message", "chars", "glyphs", "colors"]
    parameters = {**SCORE, "kwargs": {**SCORE["kwargs"], "observation_keys": keys}}
    screens = []
    for seed in (5, 6):  # the second episode runs in the first one's environment
        keys_pressed = random.Random(0)
        episode, obs, _ = run(
            NETHACK, parameters, seed, lambda obs, r=keys_pressed: r.randrange(23)
        )
        episode.close()
        screens.append("\n".join(bytes(r).decode("latin-1") for r in obs["tty_chars"]))
    assert "starved" in screens[0]
    assert "top ten" in screens[1] or "died" in screens[1]
    assert "starved" not in screens[1]  # the first game is not in the second's list
