"""Baseline: fill a cell with only one possible digit; when there is none, guess the first
possible digit of the cell with the fewest (and never revise). Solves easy puzzles, makes
mistakes on hard ones.
"""


def make_policy(context):
    return Singles()


def candidates(grid, r, c):
    used = set(grid[r]) | {grid[k][c] for k in range(9)}
    br, bc = r - r % 3, c - c % 3
    used |= {grid[br + i][bc + j] for i in range(3) for j in range(3)}
    return [d for d in range(1, 10) if d not in used]


class Singles:
    def act(self, grid):
        grid = grid.tolist()
        best = None
        for r in range(9):
            for c in range(9):
                if grid[r][c]:
                    continue
                options = candidates(grid, r, c)
                if best is None or len(options) < len(best[2]):
                    best = (r, c, options)
                if len(options) == 1:
                    return [r, c, options[0]]
        r, c, options = best
        return [r, c, options[0] if options else 1]
