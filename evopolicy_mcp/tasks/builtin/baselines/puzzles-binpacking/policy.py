"""Baseline: next fit. Keep one bin open for new items: put the item there if it fits, else
open a new bin (the earlier bins are never looked at again).
"""


def make_policy(context):
    return NextFit(context.metadata["capacity"])


class NextFit:
    def __init__(self, capacity):
        self.capacity = capacity

    def act(self, obs):
        loads = obs["loads"]
        if len(loads) and loads[-1] + obs["item"] <= self.capacity:
            return len(loads) - 1
        return len(loads)
