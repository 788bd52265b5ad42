"""AHC054 A "Treant's Forest" (AtCoder Heuristic Contest 054), one turn per step.

https://atcoder.jp/contests/ahc054/tasks/ahc054_a. An adventurer walks from the
entrance (0, N/2) of an N x N forest (20 <= N <= 40) to a flower, seeing along the four
straight lines from where it stands up to the first tree. Until it has seen the flower
it heads for random unseen cells, assuming every unseen cell is empty. Each turn you
may first plant Treants (permanent trees) on unseen empty cells, keeping a path from
the entrance to the flower. The score is the number of moves it makes.

Rules per turn, as the statement gives them: (0) your Treants; (1) at the flower the
walk ends; (2) reveal each direction up to and including the first tree; (3) the flower
revealed becomes the destination; (4) a destination no longer reachable in the
tentative map (unseen cells assumed empty) is dropped; (5) with none, or one that is
revealed and not the flower, take the first cell of a hidden random order q that is
unseen and reachable; (6) step to a neighbour one closer to it in the tentative map,
ties in the order up, down, left, right.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, InvalidAction, Step
from evopolicy_mcp.environments.graphs import GridMask
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec

LOW, HIGH = 20, 40
TURNS_PER_CELL = 10  # our cap: 10 * N^2 turns (the contest has none)
PARAMETERS: dict[str, Param] = {}
RING = ((-1, -1), (-1, 0), (-1, 1), (0, 1), (1, 1), (1, 0), (1, -1), (0, -1))

PLACEMENT = spaces.multi_discrete([HIGH, HIGH], description="[row, col] of a cell to plant")
ACTIONS = spaces.sequence_of(
    PLACEMENT,
    "the Treants to plant this turn, a list of [row, col] (empty: none). Each cell must be "
    "inside the N x N forest, not yet revealed, and empty (no tree or Treant), without repeats; "
    "afterwards the entrance must still reach the flower through empty cells. Any other list "
    "is invalid_action (the judge's WA)",
)
OBSERVATION = spaces.dict_of(
    {
        "turn": spaces.box(0, HIGH * HIGH * TURNS_PER_CELL, (), "int64"),
        "position": spaces.multi_discrete([HIGH, HIGH], description="[row, col] of the adventurer"),
        "new_revealed": spaces.sequence_of(
            PLACEMENT,
            "[row, col] of each cell revealed in the last turn (the first observation: the "
            "entrance)",
        ),
    },
    description="the start of a turn; the first observation also holds N, entrance, flower "
    "([row, col]) and grid (N strings, '.' empty, 'T' tree; row 0 first)",
)
METRICS = {
    "score": "official absolute score: moves the adventurer made (to the flower, or until the "
    "turn cap)",
    "treants": "Treants planted",
    "reached": "1 when the adventurer reached the flower, 0 when the turn cap cut the episode",
}


def _splits(grid: GridMask, trees: int, cell: tuple[int, int], n: int) -> bool:
    """Whether making ``cell`` a tree might disconnect the empty cells: its empty 4-neighbours
    do not all lie on one run of empty cells around it (then a flood decides)."""
    r, c = cell
    ring = []
    for dr, dc in RING:
        rr, cc = r + dr, c + dc
        ring.append(0 <= rr < n and 0 <= cc < n and not trees & grid.bit(rr, cc))
    runs = 0
    for k in range(1, 8, 2):  # the orthogonal neighbours sit at odd positions of RING
        if ring[k] and not (ring[k - 1] and ring[(k - 2) % 8]):
            runs += 1  # not joined to the previous orthogonal neighbour: a new run
    return runs > 1


def generate(seed: int) -> tuple[int, list[tuple[int, int]], tuple[int, int], list[int]]:
    """N, the trees, the flower and q (the destination order, as cell indices r * N + c)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(LOW, HIGH, endpoint=True))
    grid = GridMask(n, n)
    entrance = grid.bit(0, n // 2)
    cells = [(r, c) for r in range(n) for c in range(n) if (r, c) != (0, n // 2)]
    limit = max(1, int(rng.integers(0, n * n // 6, endpoint=True)))
    trees = 0
    placed: list[tuple[int, int]] = []
    empty = grid.full
    for k in rng.permutation(len(cells)).tolist():
        if len(placed) == limit:
            break
        cell = cells[k]
        bit = grid.bit(*cell)
        rest = empty & ~bit
        if _splits(grid, trees, cell, n) and grid.flood(entrance, rest) != rest:
            continue
        trees |= bit
        empty = rest
        placed.append(cell)
    far = [
        (r, c)
        for r in range(n)
        for c in range(n)
        if not trees & grid.bit(r, c) and r + abs(c - n // 2) >= 5
    ]
    flower = far[int(rng.integers(len(far)))]
    order = rng.permutation(len(cells)).tolist()
    q = [cells[k][0] * n + cells[k][1] for k in order]
    return n, placed, flower, q


def spec(options: Options) -> EnvSpec:
    meta = {
        "N": f"{LOW}..{HIGH}, per episode",
        "turn_cap": f"{TURNS_PER_CELL} * N^2 turns",
        "contest": "AHC054",
    }
    return game_spec(OBSERVATION, ACTIONS, meta, METRICS, TURNS_PER_CELL * HIGH * HIGH)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        self.load(*generate(seed))

    def load(
        self, n: int, trees: list[tuple[int, int]], flower: tuple[int, int], q: list[int]
    ) -> None:
        """Play on this forest (tests build their own)."""
        self.n = n
        self.grid = grid = GridMask(n, n)
        self.initial = list(trees)
        self.flower = flower
        self.flower_bit = grid.bit(*flower)
        self.q, self.next_q = q, 0
        self.row_trees = [0] * n  # bit c of row r: tree at (r, c)
        self.col_trees = [0] * n  # bit r of column c
        self.trees = 0
        for r, c in trees:
            self._plant(r, c)
        w = grid.width
        self.column = [sum(1 << (r * w + c) for r in range(n)) for c in range(n)]
        self.r, self.c = 0, n // 2
        self.revealed = grid.bit(self.r, self.c)
        self.free = grid.full  # the tentative map: every cell but revealed trees
        self.dest = 0  # bit of the destination, 0 = none
        self.layers: list[int] = []  # breadth-first layers from dest in self.free
        self.depth = 0  # layer of the adventurer
        self.turn = self.moves = self.treants = 0
        self.cap = TURNS_PER_CELL * n * n

    def _plant(self, r: int, c: int) -> None:
        self.row_trees[r] |= 1 << c
        self.col_trees[c] |= 1 << r
        self.trees |= self.grid.bit(r, c)

    def _begin(self) -> dict[str, Any]:
        n = self.n
        rows = [["."] * n for _ in range(n)]
        for r, c in self.initial:
            rows[r][c] = "T"
        return {
            "turn": 0,
            "position": [self.r, self.c],
            "new_revealed": [[self.r, self.c]],
            "N": n,
            "entrance": [0, n // 2],
            "flower": list(self.flower),
            "grid": ["".join(row) for row in rows],
        }

    def _place(self, action: Any) -> None:
        if (
            isinstance(action, np.ndarray)
            and action.dtype.kind in "iu"
            and (action.size == 0 or (action.ndim == 2 and action.shape[1] == 2))
        ):
            action = action.reshape(-1, 2).tolist()
        if type(action) not in (list, tuple):
            raise InvalidAction(f"expected a list of [row, col] cells, got {type(action).__name__}")
        if not action:
            return
        n, grid = self.n, self.grid
        planted = 0
        for k, cell in enumerate(action):
            if isinstance(cell, np.ndarray):
                cell = cell.tolist()
            if (
                type(cell) not in (list, tuple)
                or len(cell) != 2
                or not all(type(v) is int or isinstance(v, np.integer) for v in cell)
            ):
                raise InvalidAction(f"placement {k}: expected [row, col] ints, got {cell!r:.60}")
            r, c = int(cell[0]), int(cell[1])
            if not (0 <= r < n and 0 <= c < n):
                raise InvalidAction(f"placement {k}: ({r}, {c}) is outside the {n} x {n} forest")
            bit = grid.bit(r, c)
            if bit & self.revealed:
                raise InvalidAction(f"placement {k}: ({r}, {c}) is already revealed")
            if bit & (self.trees | planted):
                raise InvalidAction(f"placement {k}: ({r}, {c}) already holds a tree or Treant")
            planted |= bit
        empty = grid.full & ~(self.trees | planted)
        here = grid.bit(self.r, self.c)
        if not grid.flood(here, empty, self.flower_bit) & self.flower_bit:
            raise InvalidAction("these Treants cut every path from the entrance to the flower")
        for r, c in grid.cells(planted):
            self._plant(r, c)
            self.treants += 1

    def _reveal(self) -> int:
        """Step 2: the cells newly seen along the four lines (a mask)."""
        r, c, n, w = self.r, self.c, self.n, self.grid.width
        base = r * w
        right = self.row_trees[r] >> (c + 1)
        end = c + (right & -right).bit_length() if right else n - 1
        left = self.row_trees[r] & ((1 << c) - 1)
        start = left.bit_length() - 1 if left else 0
        seen = ((1 << (end - start + 1)) - 1) << (base + start)
        down = self.col_trees[c] >> (r + 1)
        bottom = r + (down & -down).bit_length() if down else n - 1
        up = self.col_trees[c] & ((1 << r) - 1)
        top = up.bit_length() - 1 if up else 0
        seen |= self.column[c] & ((1 << ((bottom + 1) * w)) - (1 << (top * w)))
        new = seen & ~self.revealed
        self.revealed |= new
        return new

    def _route(self, stop: int) -> None:
        self.layers = self.grid.layers(self.dest, self.free, stop)
        last = self.layers[-1]
        self.depth = len(self.layers) - 1 if last & stop else -1

    def _play(self, action: Any) -> Step:
        self._place(action)
        new = self._reveal()
        grid, here = self.grid, self.grid.bit(self.r, self.c)
        walls = new & self.trees
        if walls:
            self.free &= ~walls
        if self.revealed & self.flower_bit and self.dest != self.flower_bit:
            self.dest = self.flower_bit
            self._route(here)
        elif self.dest and walls and any(layer & walls for layer in self.layers[: self.depth]):
            # Distances below the adventurer's own do not depend on farther cells, so
            # only a wall among the nearer layers changes the way (or cuts it: step 4).
            self._route(here)
            if self.depth < 0:
                self.dest = 0
        if not self.dest or (self.dest & self.revealed and self.dest != self.flower_bit):
            self._choose(here)
        self._move()
        self.turn += 1
        self.moves += 1
        reached = self.grid.bit(self.r, self.c) == self.flower_bit
        obs = {
            "turn": self.turn,
            "position": [self.r, self.c],
            "new_revealed": [list(cell) for cell in grid.cells(new)],
        }
        if reached:
            return Step(obs, 1.0, True, False)
        return Step(obs, 1.0, False, self.turn >= self.cap)

    def _choose(self, here: int) -> None:
        """Step 5: the first cell of q that is unseen and reachable in the tentative map."""
        q, n, w = self.q, self.n, self.grid.width
        k = self.next_q
        while True:
            r, c = divmod(q[k], n)
            bit = 1 << (r * w + c)
            if not bit & self.revealed:
                self.dest = bit
                self._route(here)
                if self.depth >= 0:
                    break
            k += 1  # never valid again: revealed cells stay so, the region only shrinks
        self.next_q = k

    def _move(self) -> None:
        """Step 6: one step down the layers, ties up, down, left, right."""
        closer = self.layers[self.depth - 1]
        r, c, w = self.r, self.c, self.grid.width
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            rr, cc = r + dr, c + dc
            if 0 <= rr < self.n and 0 <= cc < self.n and closer >> (rr * w + cc) & 1:
                self.r, self.c = rr, cc
                self.depth -= 1
                return
        raise AssertionError("the adventurer has no step toward its destination")

    def _metrics(self) -> dict[str, float]:
        return {
            "score": float(self.moves),
            "treants": float(self.treants),
            "reached": 1.0 if (self.r, self.c) == self.flower else 0.0,
        }

    def _report(self) -> dict[str, Any]:
        return {"N": self.n, "turns": self.turn, "destinations_drawn": self.next_q}
