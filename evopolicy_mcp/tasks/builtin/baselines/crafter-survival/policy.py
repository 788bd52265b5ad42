"""Baseline: a seeded random walk that keeps pressing `do` (survival score about 3).

A deliberately weak starting point: it ignores the observation, walks a few
steps in a random direction, and presses `do` (collect, attack, drink) on
whatever it happens to face. It never seeks water or food, never sleeps on
purpose and dies at the first night, mostly to zombies. Seeded per episode,
so a replay behaves the same.
"""

import random

MOVES = (1, 2, 3, 4)  # move_left, move_right, move_up, move_down
DO = 5


def make_policy(context):
    return RandomWalk(context.policy_seed)


class RandomWalk:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.direction = MOVES[0]
        self.left = 0

    def act(self, observation):
        if self.rng.random() < 0.3:
            return DO
        if self.left == 0:
            self.direction = self.rng.choice(MOVES)
            self.left = self.rng.randint(1, 6)
        self.left -= 1
        return self.direction
