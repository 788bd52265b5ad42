"""Baseline: always accelerate right.

A deliberately weak starting point: the engine is too weak to climb the hill
directly, so this never reaches the flag (return -200). The observation is a
numpy array [position, velocity].
"""

ACCELERATE_RIGHT = 2


def make_policy(context):
    return AlwaysRight()


class AlwaysRight:
    def act(self, observation):
        return ACCELERATE_RIGHT
