"""Baseline: apply a random torque at the middle joint each step.

A deliberately weak starting point: it ignores the observation and picks a
uniformly random action, seeded per episode so a replay behaves the same.
"""

import random


def make_policy(context):
    return RandomPolicy(context.action_space["n"], context.policy_seed)


class RandomPolicy:
    def __init__(self, n_actions, seed):
        self.n_actions = n_actions
        self.rng = random.Random(seed)

    def act(self, observation):
        return self.rng.randrange(self.n_actions)
