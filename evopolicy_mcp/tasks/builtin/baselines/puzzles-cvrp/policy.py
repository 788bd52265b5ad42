"""Baseline: go to the nearest unserved customer whose demand fits the load left; when none
fits, go back to the depot to reload.
"""


def make_policy(context):
    return Nearest()


class Nearest:
    def act(self, obs):
        if "coords" in obs:
            self.coords, self.demand = obs["coords"].tolist(), obs["demand"].tolist()
        x, y = self.coords[obs["current"]]
        served, load = obs["served"], obs["load"]
        options = [k for k in range(1, len(served)) if not served[k] and self.demand[k] <= load]
        if not options:
            return 0
        return min(
            options, key=lambda k: (self.coords[k][0] - x) ** 2 + (self.coords[k][1] - y) ** 2
        )
