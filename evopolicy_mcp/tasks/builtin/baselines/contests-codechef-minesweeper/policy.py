"""Baseline: survey every cell once, then neutralize each cell that answered "mine", then
Done. Always valid (K >= M); uses all N^2 surveys, so the score is about 10.
"""


def make_policy(context):
    return SurveyAll()


class SurveyAll:
    def __init__(self):
        self.plan = None
        self.mines = []

    def act(self, obs):
        if self.plan is None:
            n = obs["N"]
            self.cells = [(x, y) for x in range(n) for y in range(n)]
            self.plan = iter(self.cells)
            self.asked = None
        if self.asked is not None and obs["result"] == -1:
            self.mines.append(self.asked)
        cell = next(self.plan, None)
        if cell is not None:
            self.asked = cell
            return [0, cell[0], cell[1]]
        self.asked = None
        if self.mines:
            x, y = self.mines.pop()
            return [1, x, y]
        return [2, 0, 0]
