"""Baseline: take an item when it fits and is worth at least its weight (value / weight >= 1)."""


def make_policy(context):
    return Density()


class Density:
    def act(self, obs):
        return int(obs["weight"] <= obs["capacity_left"] and obs["value"] >= obs["weight"])
