"""Reference tours for the routing puzzles: nearest neighbour + 2-opt, and Clarke-Wright savings.

The TSP and CVRP scores divide these references' lengths by the policy's, so a score
of 1 matches the reference and above 1 beats it. Both are deterministic functions of
the instance.
"""

from __future__ import annotations

import numpy as np

__all__ = ["distances", "length", "savings_routes", "two_opt_tour"]


def distances(points: np.ndarray) -> np.ndarray:
    diff = points[:, None, :] - points[None, :, :]
    out: np.ndarray = np.sqrt((diff**2).sum(axis=2))
    return out


def length(dist: np.ndarray, walk: list[int]) -> float:
    """Length of the closed walk ``walk`` (back to its first node)."""
    nodes = np.asarray(walk)
    return float(dist[nodes, np.roll(nodes, -1)].sum())


def two_opt_tour(dist: np.ndarray, start: int = 0) -> list[int]:
    """A nearest-neighbour tour from ``start``, improved by 2-opt (first improvement per node,
    best partner) until no exchange shortens it."""
    n = len(dist)
    tour = [start]
    left = set(range(n)) - {start}
    while left:
        here = tour[-1]
        nxt = min(left, key=lambda k: (dist[here, k], k))
        tour.append(nxt)
        left.remove(nxt)
    route = np.array(tour)
    improved = True
    while improved and n > 3:
        improved = False
        for i in range(n - 2):
            a, b = route[i], route[i + 1]
            c = route[i + 2 :]
            d = np.roll(route, -1)[i + 2 :]
            gain = dist[a, b] + dist[c, d] - dist[a, c] - dist[b, d]
            if i == 0:
                gain = gain[:-1]  # the last edge leads back into a: not a 2-opt move
            k = int(np.argmax(gain)) if len(gain) else 0
            if len(gain) and gain[k] > 1e-12:
                j = i + 2 + k
                route[i + 1 : j + 1] = route[i + 1 : j + 1][::-1].copy()
                improved = True
    return route.tolist()


def savings_routes(dist: np.ndarray, demand: list[int], capacity: int) -> list[list[int]]:
    """Clarke and Wright's parallel savings routes (node 0 the depot)."""
    n = len(dist)
    routes: dict[int, list[int]] = {k: [k] for k in range(1, n)}
    owner = {k: k for k in range(1, n)}
    load = {k: demand[k] for k in range(1, n)}
    pairs = [
        (dist[0, i] + dist[0, j] - dist[i, j], i, j) for i in range(1, n) for j in range(i + 1, n)
    ]
    pairs.sort(key=lambda p: (-p[0], p[1], p[2]))
    for gain, i, j in pairs:
        if gain <= 0:
            break
        ri, rj = owner[i], owner[j]
        if ri == rj or load[ri] + load[rj] > capacity:
            continue
        a, b = routes[ri], routes[rj]
        if a[-1] == i and b[0] == j:
            joined = a + b
        elif a[0] == i and b[-1] == j:
            joined = b + a
        elif a[0] == i and b[0] == j:
            joined = a[::-1] + b
        elif a[-1] == i and b[-1] == j:
            joined = a + b[::-1]
        else:
            continue  # i or j sits inside its route
        routes[ri] = joined
        load[ri] += load.pop(rj)
        del routes[rj]
        for k in b:
            owner[k] = ri
    return [routes[k] for k in sorted(routes)]
