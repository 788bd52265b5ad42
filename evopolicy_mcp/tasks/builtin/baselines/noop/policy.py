"""Baseline: do nothing, every step.

A deliberately weak starting point shared by tasks whose action space has a
"do nothing" action: a discrete space's ``noop`` value (for example Atari's
NOOP), and for a box the value nearest 0 inside the bounds of each component
(no torque, no throttle). It shows what the environment does on its own.
"""


def make_policy(context):
    return NoopPolicy(noop(context.action_space))


class NoopPolicy:
    def __init__(self, action):
        self.action = action

    def act(self, observation):
        return self.action


def noop(space):
    kind = space["type"]
    if kind == "discrete":
        if "noop" not in space:
            raise ValueError("this discrete action space names no 'noop' action")
        return space["noop"]
    if kind == "box":
        integer = space["dtype"].startswith(("int", "uint"))
        return nearest_zero(space["low"], space["high"], space["shape"], integer)
    if kind == "tuple":
        return [noop(s) for s in space["spaces"]]
    if kind == "dict":
        return {k: noop(s) for k, s in space["spaces"].items()}
    raise ValueError(f"a {kind} action space has no 'do nothing' action")


def nearest_zero(low, high, shape, integer):
    """The value nearest 0 within [low, high], as nested lists of ``shape``. A bound is one
    number for the whole box, null where unbounded, or nested lists per component."""
    if shape:
        return [
            nearest_zero(part(low, i), part(high, i), shape[1:], integer) for i in range(shape[0])
        ]
    value = 0.0
    if low is not None and value < low:
        value = low
    if high is not None and value > high:
        value = high
    return int(value) if integer else float(value)


def part(bound, i):
    return bound[i] if isinstance(bound, list) else bound
