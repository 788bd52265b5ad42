"""Hidden seeds: every episode's seeds derive from a per-run secret. Stdlib only.

Derivation (version ``v1``; run reports record it)::

    field(b)      = len(b) as 8-byte big-endian || b
    secret        = sha256(field("evopolicy-mcp/secret/v1") || field(decimal(seed)))
                    for a public seed (reproducible benchmarks, ``evaluate --seed``);
                    32 random bytes from ``secrets.token_bytes`` otherwise
    episode_seed  = u64(sha256(field("evopolicy-mcp/seeds/v1") || field("env")
                    || field(secret) || field(utf8(task_id)) || field(split)
                    || field(decimal(index))))
    policy_seed   = the same with "policy" in place of "env"
    u64(h)        = the first 8 bytes of h as a big-endian unsigned integer

Every part is length-prefixed, so no two different tuples hash the same
input. The kind keeps the environment's randomness and the policy's apart;
the split keeps training, validation and assessment episodes apart, so the
training pool never reveals a hidden validation or assessment episode. Index
``i`` of a split is the same episode every time it is asked for, which is
what makes a replayed pool index a matched comparison.

>>> secret = secret_from_seed(7)
>>> episode_seed(secret, "cartpole", "train", 0) == episode_seed(secret, "cartpole", "train", 0)
True
"""

from __future__ import annotations

import hashlib
import secrets

__all__ = [
    "DERIVATION",
    "SPLITS",
    "episode_seed",
    "new_secret",
    "policy_seed",
    "secret_from_seed",
]

DERIVATION = "v1"
SPLITS = ("train", "validation", "test")

_SECRET_TAG = b"evopolicy-mcp/secret/v1"
_SEED_TAG = b"evopolicy-mcp/seeds/v1"
_SECRET_BYTES = 32
# Shorter secrets would make the hidden seeds guessable by brute force.
_MIN_SECRET_BYTES = 16


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def _check_int(name: str, value: object) -> int:
    # bool is an int subclass; True as an index is always a caller's mistake.
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    return value


def secret_from_seed(seed: int, purpose: str = "public") -> bytes:
    """A 32-byte run secret from a seed, for reproducible runs and benchmarks.

    ``purpose`` separates domains: ``"public"`` is the ``evaluate --seed`` one
    anybody may use; the host derives an operator's fixed run seed with
    ``"run"``, so the public CLI cannot replay a server's hidden episodes from
    the same number. Anyone who knows a run seed can still compute its hidden
    episodes: an operator who fixes one keeps it private (and large).
    """
    seed = _check_int("seed", seed)
    return hashlib.sha256(
        _field(_SECRET_TAG) + _field(purpose.encode("utf-8")) + _field(str(seed).encode("ascii"))
    ).digest()


def new_secret() -> bytes:
    """A fresh random 32-byte run secret."""
    return secrets.token_bytes(_SECRET_BYTES)


def _derive(kind: bytes, secret: bytes, task_id: str, split: str, index: int) -> int:
    if not isinstance(secret, bytes):
        raise TypeError(f"secret must be bytes, got {type(secret).__name__}")
    if len(secret) < _MIN_SECRET_BYTES:
        raise ValueError(
            f"secret has {len(secret)} bytes; use at least {_MIN_SECRET_BYTES} "
            "(new_secret() or secret_from_seed(seed) make one)"
        )
    if not isinstance(task_id, str) or not task_id:
        raise ValueError("task_id must be a non-empty string")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
    index = _check_int("index", index)
    if index < 0:
        raise ValueError(f"episode index must be >= 0, got {index}")
    digest = hashlib.sha256(
        _field(_SEED_TAG)
        + _field(kind)
        + _field(secret)
        + _field(task_id.encode("utf-8"))
        + _field(split.encode("ascii"))
        + _field(str(index).encode("ascii"))
    ).digest()
    return int.from_bytes(digest[:8], "big")


def episode_seed(secret: bytes, task_id: str, split: str, index: int) -> int:
    """The u64 seed of the environment for episode ``index`` of ``split``."""
    return _derive(b"env", secret, task_id, split, index)


def policy_seed(secret: bytes, task_id: str, split: str, index: int) -> int:
    """The u64 seed handed to the policy (``PolicyContext.policy_seed``) for that episode."""
    return _derive(b"policy", secret, task_id, split, index)
