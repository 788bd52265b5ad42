from __future__ import annotations

import hashlib

import pytest

from evopolicy_mcp.evaluation.seeds import (
    SPLITS,
    episode_seed,
    new_secret,
    policy_seed,
    secret_from_seed,
)

SECRET = secret_from_seed(1234)


def test_secret_from_seed_is_reproducible_and_32_bytes() -> None:
    assert secret_from_seed(1234) == SECRET
    assert len(SECRET) == 32
    assert secret_from_seed(1235) != SECRET
    assert secret_from_seed(-1) != secret_from_seed(1)


def test_new_secret_is_random_32_bytes() -> None:
    secrets = {new_secret() for _ in range(16)}
    assert len(secrets) == 16
    assert all(len(s) == 32 for s in secrets)


def test_seeds_are_deterministic_u64_values() -> None:
    for split in SPLITS:
        for index in (0, 1, 17, 10**6, 2**70):
            env = episode_seed(SECRET, "cartpole", split, index)
            assert env == episode_seed(SECRET, "cartpole", split, index)
            assert 0 <= env < 2**64
            assert 0 <= policy_seed(SECRET, "cartpole", split, index) < 2**64


def test_seeds_match_the_documented_derivation() -> None:
    def field(data: bytes) -> bytes:
        return len(data).to_bytes(8, "big") + data

    expected_secret = hashlib.sha256(
        field(b"evopolicy-mcp/secret/v1") + field(b"public") + field(b"1234")
    ).digest()
    assert expected_secret == SECRET
    digest = hashlib.sha256(
        field(b"evopolicy-mcp/seeds/v1")
        + field(b"env")
        + field(SECRET)
        + field(b"cartpole")
        + field(b"validation")
        + field(b"5")
    ).digest()
    assert episode_seed(SECRET, "cartpole", "validation", 5) == int.from_bytes(digest[:8], "big")


def test_splits_never_share_an_episode_over_5000_indices_each() -> None:
    per_split = {
        split: {episode_seed(SECRET, "cartpole", split, i) for i in range(5000)} for split in SPLITS
    }
    for split, seeds in per_split.items():
        assert len(seeds) == 5000, f"{split} repeats a seed"
    train, validation, test = (per_split[s] for s in SPLITS)
    assert not train & validation
    assert not train & test
    assert not validation & test


def test_different_tasks_and_secrets_give_different_seeds() -> None:
    base = [episode_seed(SECRET, "cartpole", "train", i) for i in range(100)]
    other_task = [episode_seed(SECRET, "cartpole-v2", "train", i) for i in range(100)]
    other_secret = [episode_seed(secret_from_seed(1), "cartpole", "train", i) for i in range(100)]
    assert not set(base) & set(other_task)
    assert not set(base) & set(other_secret)


def test_length_prefixes_keep_shifted_fields_apart() -> None:
    # Unprefixed, secret+"cx" and (secret+"c")+"x" would hash the same bytes.
    shifted = episode_seed(SECRET + b"c", "x", "train", 0)
    assert episode_seed(SECRET, "cx", "train", 0) != shifted


def test_environment_and_policy_seeds_differ_for_the_same_episode() -> None:
    env = [episode_seed(SECRET, "cartpole", "train", i) for i in range(1000)]
    pol = [policy_seed(SECRET, "cartpole", "train", i) for i in range(1000)]
    assert not set(env) & set(pol)


@pytest.mark.parametrize("split", ["training", "Train", "", "assessment"])
def test_unknown_split_is_rejected_with_the_valid_ones(split: str) -> None:
    with pytest.raises(ValueError, match="use one of train, validation, test"):
        episode_seed(SECRET, "cartpole", split, 0)
    with pytest.raises(ValueError, match="unknown split"):
        policy_seed(SECRET, "cartpole", split, 0)


def test_negative_or_non_integer_index_is_rejected() -> None:
    with pytest.raises(ValueError, match="index must be >= 0, got -1"):
        episode_seed(SECRET, "cartpole", "train", -1)
    with pytest.raises(TypeError, match="index must be an int"):
        policy_seed(SECRET, "cartpole", "train", 1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="index must be an int"):
        episode_seed(SECRET, "cartpole", "train", True)


def test_short_or_non_bytes_secret_and_empty_task_are_rejected() -> None:
    with pytest.raises(ValueError, match="use at least 16"):
        episode_seed(b"short", "cartpole", "train", 0)
    with pytest.raises(TypeError, match="secret must be bytes"):
        episode_seed("x" * 32, "cartpole", "train", 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="task_id"):
        episode_seed(SECRET, "", "train", 0)
