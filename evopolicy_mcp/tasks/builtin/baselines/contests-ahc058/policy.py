"""Baseline: each turn buy the affordable level-0 or level-1 upgrade with the largest payback
over the turns left (gain minus cost), else wait. Level 2 and 3 machines are never used.
"""


def make_policy(context):
    return Payback()


class Payback:
    def act(self, obs):
        if "A" in obs:
            self.A, self.C, self.T, self.N = obs["A"], obs["C"], obs["T"], obs["N"]
        apples, B, P = obs["apples"], obs["B"], obs["P"]
        left = self.T - obs["turn"]
        best, best_value = -1, 0
        for level in (0, 1):
            for j in range(self.N):
                cost = self.C[level][j] * (P[level][j] + 1)
                if cost > apples:
                    continue
                if level == 0:
                    gain = self.A[j] * B[0][j] * left
                else:
                    gain = self.A[j] * B[1][j] * left * left // 2
                if gain - cost > best_value:
                    best, best_value = level * self.N + j, gain - cost
        return best
