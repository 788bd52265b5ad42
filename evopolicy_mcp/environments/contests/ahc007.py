"""AHC007 A "Online MST" (AtCoder Heuristic Contest 007), one edge per step.

https://atcoder.jp/contests/ahc007/tasks/ahc007_a. 400 points in [0, 800]^2 and 1995
edges (five edge-disjoint minimum spanning trees of the complete graph under rounded
Euclidean length d). The edges arrive in a random order, each with its true length l,
an integer uniform in [d, 3d]; adopt it or not before the next one is shown. The
adopted edges must connect all points; the score is round(1e8 * B / A), B the minimum
spanning tree weight under the true lengths, A the adopted total.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, InvalidAction, Step
from evopolicy_mcp.environments.contests.ahc058 import round_half_up
from evopolicy_mcp.environments.graphs import UnionFind
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec

N, M, SIDE, TREES = 400, 1995, 800, 5
PARAMETERS: dict[str, Param] = {}

ACTIONS = spaces.discrete(2, ["0: reject the edge", "1: adopt the edge"])
CHECK = spaces.action_validator(ACTIONS)
OBSERVATION = spaces.dict_of(
    {
        "i": spaces.discrete(M, description="index of this edge, 0..1994"),
        "u": spaces.discrete(N, description="its lower endpoint"),
        "v": spaces.discrete(N, description="its higher endpoint"),
        "d": spaces.box(0, np.inf, (), "int64", description="round(Euclidean length)"),
        "l": spaces.box(0, np.inf, (), "int64", description="its true length, in [d, 3d]"),
    },
    description="the edge to decide now; the first observation also holds N, M, xy "
    "(int64 [400][2], the points) and edges (int64 [1995][2], u < v, in arrival order)",
)
METRICS = {
    "score": "official absolute score round(1e8 * B / A); 0 unless the episode finished",
    "adopted": "edges adopted",
    "adopted_length": "A, total true length of the adopted edges",
    "mst_length": "B, minimum spanning tree weight under the true lengths",
}


def _points(rng: np.random.Generator) -> np.ndarray:
    xy = np.zeros((N, 2), dtype=np.int64)
    for i in range(N):
        while True:
            p = rng.integers(0, SIDE, size=2, endpoint=True)
            gaps = xy[:i] - p
            if i == 0 or np.min(gaps[:, 0] ** 2 + gaps[:, 1] ** 2) > 25:
                xy[i] = p
                break
    return xy


def _spanning_tree(weights: np.ndarray) -> list[tuple[int, int]]:
    """Prim's algorithm on a dense matrix (np.inf = no edge); ties go to the lowest index."""
    n = len(weights)
    inside = np.zeros(n, dtype=bool)
    inside[0] = True
    best = weights[0].copy()
    parent = np.zeros(n, dtype=np.int64)
    best[0] = np.inf
    edges = []
    for _ in range(n - 1):
        v = int(np.argmin(np.where(inside, np.inf, best)))
        edges.append((int(parent[v]), v))
        inside[v] = True
        closer = (weights[v] < best) & ~inside
        best[closer] = weights[v][closer]
        parent[closer] = v
    return edges


def generate(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """xy, edges [M][2] (u < v, arrival order), d and l, as the statement draws them."""
    rng = np.random.default_rng(seed)
    xy = _points(rng)
    diff = xy[:, None, :] - xy[None, :, :]
    dist = np.floor(np.sqrt((diff**2).sum(axis=2)) + 0.5)
    weights = dist.astype(np.float64)
    np.fill_diagonal(weights, np.inf)
    edges: list[tuple[int, int]] = []
    for _ in range(TREES):
        tree = _spanning_tree(weights)
        for u, v in tree:
            weights[u, v] = weights[v, u] = np.inf
        edges += tree
    order = rng.permutation(len(edges))
    pairs = np.array([sorted(edges[k]) for k in order], dtype=np.int64)
    d = dist[pairs[:, 0], pairs[:, 1]].astype(np.int64)
    lengths = rng.integers(d, 3 * d, endpoint=True)
    return xy, pairs, d, lengths


def mst_weight(n: int, pairs: list[tuple[int, int]], lengths: list[int]) -> int:
    """Kruskal's weight of a minimum spanning forest."""
    sets = UnionFind(n)
    total = 0
    for k in sorted(range(len(pairs)), key=lengths.__getitem__):
        if sets.union(*pairs[k]):
            total += lengths[k]
    return total


def score(mst: int, adopted: int) -> int:
    return round_half_up(1e8 * mst / adopted)


def spec(options: Options) -> EnvSpec:
    meta = {"N": N, "M": M, "contest": "AHC007", "problem": "ahc007_a"}
    return game_spec(OBSERVATION, ACTIONS, meta, METRICS, M)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        self.xy, pairs, d, lengths = generate(seed)
        self.pairs = pairs
        self.u, self.v = pairs[:, 0].tolist(), pairs[:, 1].tolist()
        self.d, self.lengths = d.tolist(), lengths.tolist()
        self.mst = mst_weight(N, list(zip(self.u, self.v, strict=True)), self.lengths)
        self.sets = UnionFind(N)
        self.i = 0
        self.adopted = 0
        self.total = 0

    def _observation(self) -> dict[str, Any]:
        i = self.i
        return {"i": i, "u": self.u[i], "v": self.v[i], "d": self.d[i], "l": self.lengths[i]}

    def _begin(self) -> dict[str, Any]:
        obs = self._observation()
        obs.update(N=N, M=M, xy=self.xy.copy(), edges=self.pairs.copy())
        return obs

    def _play(self, action: Any) -> Step:
        i = self.i
        if CHECK(action):
            self.adopted += 1
            self.total += self.lengths[i]
            self.sets.union(self.u[i], self.v[i])
        self.i = i + 1
        if self.i < M:
            return Step(self._observation(), 0.0, False, False)
        if self.sets.sets > 1:
            raise InvalidAction(
                f"after the last edge the adopted edges leave {self.sets.sets} separate "
                "components; they must connect all 400 points (the judge's WA)"
            )
        return Step(self._observation_end(), float(score(self.mst, self.total)), True, False)

    def _observation_end(self) -> dict[str, Any]:
        return {"i": M, "u": 0, "v": 0, "d": 0, "l": 0}

    def _metrics(self) -> dict[str, float]:
        finished = self._phase == "over"
        return {
            "score": float(score(self.mst, self.total)) if finished else 0.0,
            "adopted": float(self.adopted),
            "adopted_length": float(self.total),
            "mst_length": float(self.mst),
        }

    def _report(self) -> dict[str, Any]:
        return {"edges_decided": self.i, "components": self.sets.sets}
