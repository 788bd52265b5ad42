"""Baseline: single-cell deduction. A number whose hidden neighbours are all needed as mines
marks them; a number with all its mines marked frees its other hidden neighbours. With
nothing certain, reveal a random hidden unmarked cell.
"""

import random


def make_policy(context):
    return Deduce(context.policy_seed)


class Deduce:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.mines = set()

    def act(self, view):
        rows, cols = view.shape
        grid = view.tolist()
        safe = set()
        changed = True
        while changed and not safe:
            changed = False
            for r in range(rows):
                for c in range(cols):
                    number = grid[r][c]
                    if number <= 0:
                        continue
                    hidden = [
                        (rr, cc)
                        for rr in range(max(0, r - 1), min(rows, r + 2))
                        for cc in range(max(0, c - 1), min(cols, c + 2))
                        if grid[rr][cc] == -1
                    ]
                    marked = [cell for cell in hidden if cell in self.mines]
                    if len(hidden) == number and len(marked) < number:
                        self.mines.update(hidden)
                        changed = True
                    elif len(marked) == number:
                        safe.update(cell for cell in hidden if cell not in self.mines)
        if safe:
            r, c = min(safe)
        else:
            options = [
                (r, c)
                for r in range(rows)
                for c in range(cols)
                if grid[r][c] == -1 and (r, c) not in self.mines
            ]
            r, c = self.rng.choice(options)
        return r * cols + c
