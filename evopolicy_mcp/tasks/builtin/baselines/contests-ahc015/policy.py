"""Baseline: try the four tilts and keep the one whose box has the largest sum of squared
same-flavour component sizes (one step of look-ahead, the next candies ignored).
"""

SIDE = 10


def make_policy(context):
    return Greedy()


def tilt(grid, direction):
    """``grid``: list of 100 ints row-major; direction 0..3 = F B L R."""
    out = [0] * (SIDE * SIDE)
    for k in range(SIDE):
        cells = (
            [r * SIDE + k for r in range(SIDE)]
            if direction < 2
            else [k * SIDE + c for c in range(SIDE)]
        )
        if direction in (1, 3):
            cells.reverse()
        values = [grid[i] for i in cells if grid[i]]
        for i, v in zip(cells, values, strict=False):
            out[i] = v
    return out


def squares(grid):
    seen = [False] * (SIDE * SIDE)
    total = 0
    for start in range(SIDE * SIDE):
        if seen[start] or not grid[start]:
            continue
        seen[start] = True
        stack, size = [start], 0
        while stack:
            k = stack.pop()
            size += 1
            r, c = divmod(k, SIDE)
            for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                n = rr * SIDE + cc
                if 0 <= rr < SIDE and 0 <= cc < SIDE and not seen[n] and grid[n] == grid[k]:
                    seen[n] = True
                    stack.append(n)
        total += size * size
    return total


class Greedy:
    def act(self, obs):
        grid = [int(v) for v in obs["grid"].reshape(-1)]
        return max(range(4), key=lambda d: squares(tilt(grid, d)))
