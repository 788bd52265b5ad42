"""The candidate programs the scripted agent writes: linear policies over public spaces.

:func:`family_for` picks a :class:`Family` for a task's observation and action
spaces (or None when they are not handled); a family draws and mutates
parameters and renders them as a self-contained ``policy.py``
(:data:`POLICY_SOURCE`). Plain code, no MCP: :mod:`.scripted_agent` drives it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["POLICY_SOURCE", "Family", "Params", "family_for"]

MAX_INPUTS = 256  # features of a box observation (flattened size)
MAX_STATES = 4096  # a discrete observation's lookup table
MAX_OUTPUTS = 64  # discrete actions, or components of a box action

POLICY_SOURCE = '''\
"""{note}

Written by evopolicy_mcp.agents.scripted_agent: a linear map of the
observation ({inputs}), then {head}. Its parameters come from random
search and hill climbing, compared on matched pool indices.
"""

OBSERVATION = {observation!r}  # ("box", size) or ("discrete", n, start)
CENTER = {center!r}
SCALE = {scale!r}
WEIGHTS = {weights!r}
BIAS = {bias!r}
ACTION = {action!r}  # ("discrete", start) or ("box", shape, low, high, center, scale)


def make_policy(context):
    return LinearPolicy()


def _flat(value):
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in _flat(item)]
    return [float(value)]


def _shaped(values, shape):
    if not shape:
        return values[0]
    if len(shape) == 1:
        return values
    step = len(values) // shape[0]
    return [_shaped(values[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


class LinearPolicy:
    def act(self, observation):
        if OBSERVATION[0] == "discrete":
            state = int(_flat(observation)[0]) - OBSERVATION[2]
            out = [row[state] + b for row, b in zip(WEIGHTS, BIAS)]
        else:
            x = [(v - c) / s for v, c, s in zip(_flat(observation), CENTER, SCALE)]
            out = [b + sum(w * v for w, v in zip(row, x)) for row, b in zip(WEIGHTS, BIAS)]
        if ACTION[0] == "discrete":
            return ACTION[1] + max(range(len(out)), key=out.__getitem__)
        _, shape, low, high, center, scale = ACTION
        values = []
        for y, lo, hi, c, s in zip(out, low, high, center, scale):
            v = c + s * y
            if lo is not None:
                v = max(lo, v)
            if hi is not None:
                v = min(hi, v)
            values.append(v)
        return _shaped(values, shape)
'''

Params = tuple[list[list[float]], list[float]]


def _size(shape: Sequence[int]) -> int:
    return math.prod(int(s) for s in shape)


def _bounds(value: Any, size: int) -> list[float | None]:
    """A box's ``low``/``high`` (one number, nested lists, ``None`` = unbounded), flattened."""
    if isinstance(value, list):
        flat: list[Any] = []
        todo = list(value)
        while todo:
            item = todo.pop(0)
            if isinstance(item, list):
                todo[:0] = item
            else:
                flat.append(item)
        return [None if v is None else float(v) for v in flat]
    return [None if value is None else float(value)] * size


def _centre_scale(
    low: list[float | None], high: list[float | None]
) -> tuple[list[float], list[float]]:
    centre: list[float] = []
    scale: list[float] = []
    for lo, hi in zip(low, high, strict=True):
        if lo is None or hi is None or hi <= lo:
            centre.append(0.0)
            scale.append(1.0)
        else:
            centre.append((lo + hi) / 2)
            scale.append((hi - lo) / 2)
    return centre, scale


@dataclass(frozen=True)
class Family:
    """Linear policies over the public spaces: ``out = W . features(obs) + b``.

    A discrete observation is one-hot, so ``W`` is a lookup table; a discrete
    action is the argmax of ``out``; a box action is ``centre + scale * out``
    clipped to its bounds.
    """

    observation: tuple[Any, ...]
    center: list[float]
    scale: list[float]
    action: tuple[Any, ...]
    inputs: int
    outputs: int

    @property
    def kind(self) -> str:
        table = "lookup table" if self.observation[0] == "discrete" else "linear map"
        head = "argmax" if self.action[0] == "discrete" else "clipped"
        return f"{table}, {head} ({self.inputs} inputs, {self.outputs} outputs)"

    def draw(self, rng: random.Random) -> Params:
        weights = [[rng.gauss(0.0, 1.0) for _ in range(self.inputs)] for _ in range(self.outputs)]
        return weights, [0.0] * self.outputs

    def mutate(self, params: Params, rng: random.Random, sigma: float) -> Params:
        weights, bias = params
        if self.observation[0] == "discrete":
            # Change a few table entries, not all of them at once.
            columns = set(rng.sample(range(self.inputs), max(1, min(self.inputs, 4))))
            new_bias = list(bias)
        else:
            columns = set(range(self.inputs))
            new_bias = [b + rng.gauss(0.0, 0.1 * sigma) for b in bias]
        new_weights = [
            [w + rng.gauss(0.0, sigma) if i in columns else w for i, w in enumerate(row)]
            for row in weights
        ]
        return new_weights, new_bias

    def source(self, params: Params, note: str) -> str:
        weights, bias = params
        head = "argmax over actions" if self.action[0] == "discrete" else "clipped to the box"
        inputs = "one-hot state" if self.observation[0] == "discrete" else "scaled components"
        return POLICY_SOURCE.format(
            note=note,
            inputs=inputs,
            head=head,
            observation=self.observation,
            center=[round(c, 6) for c in self.center],
            scale=[round(s, 6) for s in self.scale],
            weights=[[round(w, 6) for w in row] for row in weights],
            bias=[round(b, 6) for b in bias],
            action=self.action,
        )


def family_for(observation_space: dict[str, Any], action_space: dict[str, Any]) -> Family | None:
    """The candidate family for these public spaces, or None when they are not handled."""
    obs_type, act_type = observation_space.get("type"), action_space.get("type")
    center: list[float] = []
    scale: list[float] = []
    if obs_type == "discrete" and 0 < int(observation_space["n"]) <= MAX_STATES:
        n = int(observation_space["n"])
        observation: tuple[Any, ...] = ("discrete", n, int(observation_space.get("start", 0)))
        inputs = n
    elif obs_type == "box" and 0 < _size(observation_space["shape"]) <= MAX_INPUTS:
        inputs = _size(observation_space["shape"])
        low = _bounds(observation_space.get("low"), inputs)
        high = _bounds(observation_space.get("high"), inputs)
        if len(low) != inputs or len(high) != inputs:
            return None
        center, scale = _centre_scale(low, high)
        observation = ("box", inputs)
    else:
        return None
    if act_type == "discrete" and 1 < int(action_space["n"]) <= MAX_OUTPUTS:
        outputs = int(action_space["n"])
        action: tuple[Any, ...] = ("discrete", int(action_space.get("start", 0)))
    elif (
        act_type == "box"
        and str(action_space.get("dtype", "float32")).startswith("float")
        and 0 < _size(action_space["shape"]) <= MAX_OUTPUTS
    ):
        outputs = _size(action_space["shape"])
        low = _bounds(action_space.get("low"), outputs)
        high = _bounds(action_space.get("high"), outputs)
        if len(low) != outputs or len(high) != outputs:
            return None
        a_center, a_scale = _centre_scale(low, high)
        shape = [int(s) for s in action_space["shape"]]
        action = ("box", shape, low, high, a_center, a_scale)
    else:
        return None
    return Family(observation, center, scale, action, inputs, outputs)
