"""The kit's Gymnasium adapter: any registered id, every space type, replays, frames."""

from __future__ import annotations

import io
import random
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from evopolicy_mcp.adapters import replay, spaces
from evopolicy_mcp.adapters.conformance import check_adapter
from evopolicy_mcp.adapters.gym import GymAdapter, Texts
from evopolicy_mcp.adapters.protocol import AdapterError, InvalidAction, load_adapter
from evopolicy_mcp.kernel import frames

TOY = {"env_id": "Toy/Spaces-v0", "package": "tests.support.toy_env"}
ADAPTER = load_adapter("gymnasium")


def play(parameters: dict[str, Any], seed: int, steps: int = 40) -> Any:
    spec = ADAPTER.spec(parameters)
    rng = random.Random(seed)
    episode = ADAPTER.make_episode(parameters, seed)
    observations = [episode.reset()]
    for _ in range(steps):
        step = episode.step(spaces.sample_action(spec.action_space, rng))
        observations.append(step.observation)
        if step.terminated or step.truncated:
            break
    return episode, observations


def test_an_id_another_package_registers_works_once_the_task_declares_the_package() -> None:
    code = (  # a fresh interpreter, where nothing has imported the package
        "from evopolicy_mcp.adapters.protocol import load_adapter, AdapterError\n"
        "try:\n"
        "    load_adapter('gymnasium').spec({'env_id': 'Toy/Spaces-v0'})\n"
        "except AdapterError as exc:\n"
        "    print(exc)\n"
    )
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "cannot make Toy/Spaces-v0: Namespace Toy not found" in fresh.stdout, fresh.stderr
    spec = ADAPTER.spec(TOY)
    assert spec.metadata["env_id"] == "Toy/Spaces-v0"
    with pytest.raises(AdapterError, match="'tests.support.no_such', which cannot be imported"):
        ADAPTER.spec({"env_id": "Toy/Spaces-v0", "package": "tests.support.no_such"})


def test_every_gymnasium_space_type_is_described_with_bounds_shapes_and_dtypes() -> None:
    observation = ADAPTER.spec(TOY).observation_space
    parts = observation["spaces"]
    assert observation["type"] == "dict"
    assert parts["grid"] == {
        "type": "box",
        "shape": [5, 5, 3],
        "dtype": "uint8",
        "low": 0,
        "high": 255,
    }
    assert parts["mission"] == {
        "type": "text",
        "min_length": 1,
        "max_length": 40,
        "charset": " abcdefghijklmnopqrstuvwxyz",
    }
    assert parts["counts"] == {"type": "multi_discrete", "nvec": [3, 4], "start": [0, 0]}
    assert parts["flags"] == {"type": "multi_binary", "shape": [3]}
    assert [p["type"] for p in parts["pair"]["spaces"]] == ["discrete", "box"]
    assert parts["trail"] == {"type": "sequence", "item": {"type": "discrete", "n": 4, "start": 0}}
    action = ADAPTER.spec(TOY).action_space
    assert action["spaces"]["say"]["charset"] == "abc"


def test_a_space_whose_samples_are_strings_is_text() -> None:
    from gymnasium import spaces as gs

    class Mission(gs.Space[str]):
        def sample(self, mask: Any = None, probability: Any = None) -> str:
            return "get the key"

    assert spaces.describe_gymnasium_space(Mission(), description="the mission")["type"] == "text"


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ({"move": [0, 3], "switches": [0, 1], "say": "ab"}, r"action\['move'\]\[1\] = 3"),
        ({"move": [0, 0], "switches": [0, 2], "say": "ab"}, r"action\['switches'\]"),
        ({"move": [0, 0], "switches": [0, 1], "say": "abd"}, "not in the space's charset"),
        ({"move": [0, 0], "switches": [0, 1], "say": ""}, "at least 1"),
        ({"move": [0, 0], "switches": [0, 1], "say": 7}, "expected a str"),
        ({"move": [0, 0], "switches": [0, 1]}, "expected a dict with keys"),
    ],
)
def test_composite_actions_are_checked_part_by_part(action: Any, message: str) -> None:
    episode = ADAPTER.make_episode(TOY, 1)
    episode.reset()
    with pytest.raises(InvalidAction, match=message):
        episode.step(action)
    episode.close()


def test_sequences_validate_each_item_and_text_counts_characters() -> None:
    check = spaces.action_validator(spaces.sequence_of(spaces.discrete(3)))
    assert check([0, 2, 1]) == (0, 2, 1)
    assert check([]) == ()
    with pytest.raises(InvalidAction, match=r"action\[i\]"):
        check([0, 3])
    text = spaces.action_validator(spaces.text(3))
    assert text("héé") == "héé"
    with pytest.raises(InvalidAction, match="at most 3"):
        text("four")


def test_the_toy_environment_passes_every_conformance_check() -> None:
    checks = check_adapter("gymnasium", TOY, steps=30)
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]
    names = {c.name for c in checks}
    assert {"deterministic_across_processes", "artifacts", "invalid_actions"} <= names


def test_observations_with_text_and_nested_parts_cross_the_frame_codec_intact() -> None:
    _, observations = play(TOY, 3, steps=8)
    for obs in observations:
        kind, value = frames.read_frame(frames.frame(frames.OBSERVATION, obs), 1 << 20)
        assert kind == frames.OBSERVATION
        assert isinstance(value["mission"], str) and value["mission"] == obs["mission"]
        assert isinstance(value["grid"], np.ndarray) and value["grid"].dtype == np.uint8
        assert np.array_equal(value["grid"], obs["grid"])
        assert value["pair"][0] == obs["pair"][0] and isinstance(value["trail"], list)
        assert value["trail"] == list(obs["trail"])


def test_an_image_travels_as_raw_bytes_not_as_a_list_of_numbers() -> None:
    image = np.arange(210 * 160 * 3, dtype=np.uint64).astype(np.uint8).reshape(210, 160, 3)
    data = frames.frame(frames.OBSERVATION, {"pixels": image, "mission": "x"})
    assert len(data) < image.nbytes + 100  # one byte per value, plus headers
    assert image.tobytes() in data


def test_a_traced_episode_gets_a_bounded_replay_of_itself() -> None:
    from PIL import Image

    episode, _ = play(TOY, 5)
    files = episode.artifacts()
    assert set(files) == {"replay.gif"} and episode.report() is None
    gif = Image.open(io.BytesIO(files["replay.gif"]))
    assert gif.size == (60, 40) and 2 <= gif.n_frames <= 13
    assert len(files["replay.gif"]) <= replay.GIF_BYTES
    episode.close()


def test_a_long_episode_replay_keeps_at_most_its_frame_budget_and_size() -> None:
    from PIL import Image

    episode, _ = play({**TOY, "kwargs": {"length": 600}}, 6, steps=600)
    files = episode.artifacts()
    gif = Image.open(io.BytesIO(files["replay.gif"]))
    assert gif.n_frames <= replay.GIF_FRAMES + replay.LAST_FRAMES + 2
    episode.close()


def test_large_frames_are_scaled_down_to_the_replay_bound() -> None:
    frame = np.zeros((600, 1000, 3), dtype=np.uint8)
    assert replay.MAX_SIDE // 2 < max(replay._fit(frame).shape[:2]) <= replay.MAX_SIDE


def test_where_rendering_is_impossible_the_report_says_so_and_nothing_fails() -> None:
    episode, _ = play({"env_id": "Toy/NoRender-v0", "package": "tests.support.toy_env"}, 5)
    assert episode.artifacts() == {}
    report = episode.report()
    assert report is not None
    assert report["replay"].startswith("no replay: this machine cannot render")
    assert "DISPLAY" in report["replay"]
    episode.close()


def test_a_family_adapter_adds_texts_and_rejects_ids_outside_its_catalogue() -> None:
    texts = Texts(
        action=lambda env, s: {"description": "what to do"},
        reward="+1 per step",
        metrics={"long": "1 if the episode lasted 10 steps"},
        outcome=lambda t: {"long": 1.0 if t.steps >= 10 else 0.0},
    )
    family = GymAdapter(
        "toys", {"Toy/Spaces-v0": texts}, default=None, package="tests.support.toy_env"
    )
    spec = family.spec({"env_id": "Toy/Spaces-v0"})
    assert spec.action_space["description"] == "what to do"
    assert spec.metadata["reward"] == "+1 per step" and spec.metrics == texts.metrics
    with pytest.raises(AdapterError, match="not supported; supported: Toy/Spaces-v0"):
        family.spec({"env_id": "CartPole-v1"})
    episode = family.make_episode({"env_id": "Toy/Spaces-v0"}, 0)
    episode.reset()
    rng = random.Random(0)
    for _ in range(12):
        episode.step(spaces.sample_action(spec.action_space, rng))
    assert episode.metrics() == {"long": 1.0}
    episode.close()
