"""Baseline: a random engine force in [-1.0, 1.0] each step.

A deliberately weak starting point that ignores the observation. The action
is a list of one number (the action space is a box of shape [1]); a bare
number would be an invalid action.
"""

import random


def make_policy(context):
    space = context.action_space
    return RandomForce(space["low"], space["high"], context.policy_seed)


class RandomForce:
    def __init__(self, low, high, seed):
        self.low, self.high = low, high
        self.rng = random.Random(seed)

    def act(self, observation):
        return [self.rng.uniform(self.low, self.high)]
