"""The policy ABI: what a submitted program imports and implements. Stdlib only.

A program is a directory with ``policy.py`` at its top. ``policy.py`` defines
``make_policy(context)`` and returns an object with ``act(observation)``::

    # policy.py
    def make_policy(context):
        return Controller(context.policy_seed)

    class Controller:
        def __init__(self, seed):
            self.steps = 0

        def act(self, observation):
            self.steps += 1
            return 0 if observation[2] < 0 else 1

Rules the runner enforces:

- One fresh process per episode: ``make_policy`` is called once per episode and
  state lives only as long as that episode. Nothing carries over.
- ``observation`` is plain Python values (int, float, bool, str, list, dict,
  tuple) or ``numpy.ndarray`` for array observations.
- ``act`` returns an action: a plain value, a list, or a numpy scalar or array.
  The adapter validates it; an action outside the action space ends the
  episode with ``invalid_action``. Actions are never clipped or repaired.
- Helper modules next to ``policy.py`` are importable by plain ``import``.
- Whatever the policy prints (stdout or stderr) is captured, bounded, and its
  tail comes back in feedback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["ABI_VERSION", "Policy", "PolicyContext", "PolicyFactory"]

ABI_VERSION = 1


@dataclass(frozen=True)
class PolicyContext:
    """What ``make_policy`` receives: everything public about the episode.

    ``observation_space`` and ``action_space`` are the task's public space
    descriptions (plain dicts, the same text ``describe_task`` shows).
    ``policy_seed`` is a u64 fixed per episode: seed your own randomness with
    it (``random.Random(context.policy_seed)``) and a replay of the same
    episode behaves the same.
    """

    task_id: str
    observation_space: dict[str, Any]
    action_space: dict[str, Any]
    parameters: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    policy_seed: int = 0
    abi_version: int = ABI_VERSION


class Policy(Protocol):
    def act(self, observation: Any) -> Any: ...


class PolicyFactory(Protocol):
    def __call__(self, context: PolicyContext) -> Policy: ...
