"""Graph helpers the written games share: union-find, grid floods on bitmasks, neighbours.

A grid of ``rows x cols`` cells as a bitmask puts cell (r, c) at bit ``r * (cols + 1) + c``:
the spare column stays 0, so a shift by one never wraps from one row into the next, and a
flood is a handful of big-int operations per layer instead of a Python loop per cell.
"""

from __future__ import annotations

__all__ = ["GridMask", "UnionFind"]


class UnionFind:
    """Disjoint sets over 0..n-1 with path halving and union by size."""

    __slots__ = ("parent", "size", "sets")

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))
        self.size = [1] * n
        self.sets = n

    def find(self, x: int) -> int:
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> bool:
        """Join the sets of ``a`` and ``b``; False when they were one already."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]
        self.sets -= 1
        return True


class GridMask:
    """Bitmask floods on a ``rows x cols`` grid (4-neighbourhood)."""

    __slots__ = ("cols", "rows", "width", "full")

    def __init__(self, rows: int, cols: int) -> None:
        self.rows, self.cols, self.width = rows, cols, cols + 1
        row = (1 << cols) - 1
        self.full = sum(row << (r * self.width) for r in range(rows))

    def bit(self, r: int, c: int) -> int:
        return 1 << (r * self.width + c)

    def cell(self, index: int) -> tuple[int, int]:
        return divmod(index, self.width)

    def spread(self, mask: int, free: int) -> int:
        """``mask`` and its 4-neighbours, within ``free``."""
        w = self.width
        return (mask | mask << 1 | mask >> 1 | mask << w | mask >> w) & free

    def flood(self, start: int, free: int, stop: int = 0) -> int:
        """The cells of ``free`` connected to ``start`` (a mask within ``free``); ends early
        once the region meets ``stop``."""
        region, w = start & free, self.width
        while True:
            grown = (region | region << 1 | region >> 1 | region << w | region >> w) & free
            if grown == region or grown & stop:
                return grown
            region = grown

    def layers(self, start: int, free: int, stop: int = 0) -> list[int]:
        """Breadth-first layers from ``start`` through ``free``: ``layers[d]`` holds the cells
        at distance d. Ends with the layer that meets ``stop`` (when given) or when no cell is
        left to reach."""
        w = self.width
        seen = frontier = start & free
        out = [frontier]
        while frontier and not frontier & stop:
            grown = (frontier << 1 | frontier >> 1 | frontier << w | frontier >> w) & free & ~seen
            if not grown:
                break
            seen |= grown
            out.append(grown)
            frontier = grown
        return out

    def cells(self, mask: int) -> list[tuple[int, int]]:
        """The (row, col) of every set bit, in bit order (row-major)."""
        out = []
        w = self.width
        while mask:
            low = mask & -mask
            out.append(divmod(low.bit_length() - 1, w))
            mask ^= low
        return out
