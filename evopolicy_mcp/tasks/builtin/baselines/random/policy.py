"""Baseline: a uniformly random action every step, seeded by the episode's policy seed.

A deliberately weak starting point shared by many tasks: it ignores the
observation. It reads the action space from ``context.action_space`` (any of
the space types) and returns plain Python values: an int for a discrete space,
nested lists of numbers for a box, and so on. Unbounded box components are drawn
from a normal distribution around 0.
"""

import random


def make_policy(context):
    rng = random.Random(context.policy_seed)
    return RandomPolicy(sampler(context.action_space, rng))


class RandomPolicy:
    def __init__(self, sample):
        self.sample = sample

    def act(self, observation):
        return self.sample()


def sampler(space, rng):
    """A function of no arguments that draws one action of ``space``."""
    kind = space["type"]
    if kind == "discrete":
        start, n = space["start"], space["n"]
        return lambda: rng.randrange(start, start + n)
    if kind == "box":
        shape = space["shape"]
        size = 1
        for dim in shape:
            size *= dim
        integer = space["dtype"].startswith(("int", "uint"))
        lows, highs = flat(space["low"], size), flat(space["high"], size)
        draws = [number(lo, hi, integer, rng) for lo, hi in zip(lows, highs, strict=True)]
        return lambda: shaped([draw() for draw in draws], shape)
    if kind == "multi_discrete":
        pairs = list(zip(space["start"], space["nvec"], strict=True))
        return lambda: [rng.randrange(s, s + n) for s, n in pairs]
    if kind == "multi_binary":
        shape = space["shape"]
        size = 1
        for dim in shape:
            size *= dim
        return lambda: shaped([rng.randrange(2) for _ in range(size)], shape)
    if kind == "tuple":
        parts = [sampler(s, rng) for s in space["spaces"]]
        return lambda: [part() for part in parts]
    if kind == "dict":
        keyed = {k: sampler(s, rng) for k, s in space["spaces"].items()}
        return lambda: {k: part() for k, part in keyed.items()}
    if kind == "text":
        chars = space.get("charset") or "abcdefghijklmnopqrstuvwxyz "
        low = space.get("min_length", 0)
        high = space.get("max_length") or low + 16
        return lambda: "".join(rng.choice(chars) for _ in range(rng.randint(low, high)))
    if kind == "sequence":
        item = sampler(space["item"], rng)
        return lambda: [item() for _ in range(rng.randint(0, 4))]
    raise ValueError(f"no random actions for a space of type {kind!r}")


def flat(bound, size):
    """A box bound (one number, null, or nested lists) as a flat list of ``size`` items."""
    if not isinstance(bound, list):
        return [bound] * size
    out = []
    stack = [bound]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        else:
            out.append(item)
    return out


def number(low, high, integer, rng):
    if low is not None and high is not None:
        if integer:
            return lambda: rng.randint(int(low), int(high))
        return lambda: rng.uniform(low, high)
    if integer:
        base = 0 if low is None and high is None else (low if low is not None else high)
        return lambda: int(base)
    if low is not None:
        return lambda: low + rng.expovariate(1.0)
    if high is not None:
        return lambda: high - rng.expovariate(1.0)
    return lambda: rng.gauss(0.0, 1.0)


def shaped(values, shape):
    """``values`` (flat, row-major) as nested lists of ``shape``; a bare number for []."""
    if not shape:
        return values[0]
    for dim in reversed(shape[1:]):
        values = [values[i : i + dim] for i in range(0, len(values), dim)]
    return values
