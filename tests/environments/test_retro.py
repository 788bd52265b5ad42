"""Stable-Retro: one emulator per child process, seeds through sticky actions."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

pytest.importorskip("stable_retro", reason="the [retro] extra is not installed")

import gymnasium  # noqa: E402

from evopolicy_mcp.environments.retro import env as retro_env  # noqa: E402
from evopolicy_mcp.environments.retro.adapter import GAMES  # noqa: E402

GAME = "retro/Airstriker-Genesis-v0"


def play(env: gymnasium.Env, seed: int, steps: int = 300) -> list[np.ndarray]:
    rng = np.random.default_rng(99)  # the same buttons whatever the seed
    frames = [env.reset(seed=seed)[0]]
    for _ in range(steps):
        frames.append(env.step(rng.integers(0, 2, 12))[0])
    return frames


def test_the_games_registered_are_those_whose_rom_ships_in_the_wheel() -> None:
    assert tuple(retro_env.games()) == GAMES
    assert [i for i in gymnasium.registry if i.startswith("retro/")] == [
        f"retro/{g}" for g in GAMES
    ]


def test_two_emulators_run_at_once_in_one_process_and_the_seed_decides_the_episode() -> None:
    one, two = gymnasium.make(GAME), gymnasium.make(GAME)  # in-process retro allows one
    try:
        a, b = play(one, 1), play(two, 1)
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
        c = play(two, 2)
        assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))
    finally:
        one.close()
        two.close()


def test_the_emulator_process_ends_with_the_environment_and_its_death_is_reported() -> None:
    env = gymnasium.make(GAME)
    env.reset(seed=0)
    child = env.unwrapped._proc
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    with pytest.raises(retro_env.RetroError, match="emulator process failed"):
        env.step(np.zeros(12, dtype=np.int8))
    env.close()
    other = gymnasium.make(GAME)
    other.reset(seed=0)
    pid = other.unwrapped._proc.pid
    other.close()
    assert other.unwrapped._proc.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_ram_observations_and_the_replay_screen_follow_the_same_game() -> None:
    ram = gymnasium.make(GAME, obs_type="ram", render_mode="rgb_array")
    image = gymnasium.make(GAME)
    try:
        play(ram, 4, 100)
        frames = play(image, 4, 100)
        assert ram.observation_space.shape == (65536,)
        assert np.array_equal(ram.render(), frames[-1])
    finally:
        ram.close()
        image.close()
