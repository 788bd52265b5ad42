"""Baseline: try every rotation and column, keep the placement that leaves the lowest total
column height plus twice the covered holes plus the
height steps between neighbouring columns (rows cleared first).
"""


def make_policy(context):
    return Flat(context.metadata["shapes"], context.metadata["width"])


def place(rows, cells, x):
    """The board after dropping ``cells`` at column ``x`` (rows cleared), or None if it tops out."""
    height, width = len(rows), len(rows[0])
    grid = [list(row) for row in rows]
    tops = [next((r for r in range(height) if grid[r][c] == "#"), height) for c in range(width)]
    y = min(tops[x + dc] - 1 - max(r for r, c in cells if c == dc) for dc in {c for _, c in cells})
    if y < 0:
        return None
    for dr, dc in cells:
        grid[y + dr][x + dc] = "#"
    kept = [row for row in grid if "." in row]
    return [["."] * width for _ in range(height - len(kept))] + kept


def cost(grid):
    height, width = len(grid), len(grid[0])
    heights, holes = [], 0
    for c in range(width):
        top = next((r for r in range(height) if grid[r][c] == "#"), height)
        heights.append(height - top)
        holes += sum(1 for r in range(top, height) if grid[r][c] == ".")
    bumps = sum(abs(heights[c] - heights[c + 1]) for c in range(width - 1))
    return sum(heights) + 2 * holes + bumps


class Flat:
    def __init__(self, shapes, width):
        self.shapes, self.width = shapes, width

    def act(self, obs):
        best, best_cost = 0, None
        for rotation, cells in enumerate(self.shapes[obs["piece"]]):
            span = max(c for _, c in cells) + 1
            for x in range(self.width - span + 1):
                grid = place(obs["board"], cells, x)
                if grid is None:
                    continue
                value = cost(grid)
                if best_cost is None or value < best_cost:
                    best, best_cost = rotation * self.width + x, value
        return best
