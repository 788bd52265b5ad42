"""Baseline: on the first turn, plant walls of Treants across every other row with a gap at
alternating ends (a comb the adventurer must zigzag through), keeping a row only if the
entrance still reaches the flower. Plants nothing afterwards.
"""

from collections import deque


def make_policy(context):
    return Comb()


def connected(n, blocked, start, goal):
    seen = {start}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        if (r, c) == goal:
            return True
        for cell in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if 0 <= cell[0] < n and 0 <= cell[1] < n and cell not in blocked and cell not in seen:
                seen.add(cell)
                queue.append(cell)
    return False


class Comb:
    def __init__(self):
        self.started = False

    def act(self, obs):
        if self.started:
            return []
        self.started = True
        n = obs["N"]
        entrance, flower = tuple(obs["entrance"]), tuple(obs["flower"])
        blocked = {(r, c) for r in range(n) for c in range(n) if obs["grid"][r][c] == "T"}
        planted = []
        for r in range(2, n - 1, 2):
            gap = n - 1 if (r // 2) % 2 else 0
            row = [
                (r, c)
                for c in range(n)
                if c != gap and (r, c) not in blocked and (r, c) not in (flower, entrance)
            ]
            blocked.update(row)
            if connected(n, blocked, entrance, flower):
                planted += row
            else:
                blocked.difference_update(row)
        return [list(cell) for cell in planted]
