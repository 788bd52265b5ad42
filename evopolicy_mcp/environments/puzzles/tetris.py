"""Tetris on a text board: choose where each falling piece lands, clear full rows.

Each step places the current piece: choose a rotation and the column of its left edge;
the piece drops straight down from above the board until it rests on the floor or a
filled cell (a hard drop, no sliding under overhangs). Every full row is then cleared and
the rows above it move down. Pieces are drawn uniformly from I O T S Z J L; the next one
is shown. The game ends when a piece would rest with a cell above the top row, or after
the variant's number of pieces.
"""

from __future__ import annotations

import random
from typing import Any

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, InvalidAction, Step
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec

PARAMETERS = {
    "width": Param(10, 4, 20, "columns of the board"),
    "height": Param(20, 4, 40, "rows of the board"),
    "pieces": Param(500, 10, 100_000, "pieces in a game"),
}
SPAWN = {
    "I": ["####"],
    "O": ["##", "##"],
    "T": [".#.", "###"],
    "S": [".##", "##."],
    "Z": ["##.", ".##"],
    "J": ["#..", "###"],
    "L": ["..#", "###"],
}
NAMES = "IOTSZJL"
Cells = tuple[tuple[int, int], ...]


def _rotations(picture: list[str]) -> list[Cells]:
    """The piece's cells (row, col) for rotations 0..3, each turned a quarter clockwise
    from the one before and moved so its top row and left column are 0."""
    cells = [(r, c) for r, line in enumerate(picture) for c, ch in enumerate(line) if ch == "#"]
    out = []
    for _ in range(4):
        out.append(tuple(sorted(cells)))
        height = max(r for r, _ in cells) + 1
        cells = [(c, height - 1 - r) for r, c in cells]
        low_r, low_c = min(r for r, _ in cells), min(c for _, c in cells)
        cells = [(r - low_r, c - low_c) for r, c in cells]
    return out


SHAPES = {name: _rotations(SPAWN[name]) for name in NAMES}
METRICS = {
    "score": "lines cleared / floor(0.4 * pieces in a game): 1 = every piece's cells cleared",
    "lines": "rows cleared",
    "placed": "pieces placed",
    "topped_out": "1 when a piece came to rest above the top row",
}


def _drops() -> dict[str, list[tuple[int, Cells, list[tuple[int, int]]]]]:
    """Per piece and rotation: width, cells, and per column (offset, lowest row)."""
    out: dict[str, list[tuple[int, Cells, list[tuple[int, int]]]]] = {}
    for name, rotations in SHAPES.items():
        out[name] = []
        for cells in rotations:
            width = max(c for _, c in cells) + 1
            bottoms = [(dc, max(r for r, c in cells if c == dc)) for dc in range(width)]
            out[name].append((width, cells, bottoms))
    return out


DROPS = _drops()


def spec(options: Options) -> EnvSpec:
    width, height = options.width, options.height
    actions = spaces.discrete(
        4 * width,
        description=f"rotation * {width} + column: rotation 0..3 (quarter turns clockwise, see "
        "metadata.shapes), column of the piece's left edge; a piece that would stick out on "
        "the right is invalid_action",
    )
    board = spaces.sequence_of(
        spaces.text(width, width, ".#"),
        f"{height} strings of {width} characters, row 0 at the top: '#' filled, '.' empty",
    )
    observation = spaces.dict_of(
        {
            "board": board,
            "piece": spaces.text(1, 1, NAMES, "the piece to place"),
            "next": spaces.text(1, 1, NAMES, "the piece after it"),
            "pieces_left": spaces.box(1, options.pieces, (), "int64"),
        },
        description="pieces are letters I O T S Z J L",
    )
    shapes = {name: [[list(cell) for cell in cells] for cells in SHAPES[name]] for name in NAMES}
    meta = {
        "width": width,
        "height": height,
        "pieces": options.pieces,
        "shapes": shapes,
        "shape_note": "shapes[piece][rotation] = the [row, col] cells, top-left at [0, 0]",
    }
    return game_spec(observation, actions, meta, METRICS, options.pieces)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        self.width, self.height, self.total = options.width, options.height, options.pieces
        self.rng = random.Random(seed)
        self.empty = "." * self.width
        self.rows = [self.empty] * self.height
        self.top = [self.height] * self.width  # row of each column's highest filled cell
        self.piece, self.next = self._draw(), self._draw()
        self.placed = self.lines = 0
        self.topped = False
        self.check = spaces.action_validator(spaces.discrete(4 * self.width))

    def _draw(self) -> str:
        return NAMES[int(self.rng.random() * 7)]

    def _observation(self) -> dict[str, Any]:
        return {
            "board": list(self.rows),
            "piece": self.piece,
            "next": self.next,
            "pieces_left": self.total - self.placed,
        }

    def _begin(self) -> dict[str, Any]:
        return self._observation()

    def _play(self, action: Any) -> Step:
        rotation, x = divmod(self.check(action), self.width)
        width, cells, bottoms = DROPS[self.piece][rotation]
        if x + width > self.width:
            raise InvalidAction(
                f"piece {self.piece} in rotation {rotation} is {width} wide: column {x} puts it "
                f"past the right edge (columns 0..{self.width - width})"
            )
        top = self.top
        y = min(top[x + dc] - 1 - low for dc, low in bottoms)
        if y < 0:
            self.topped = True
            return Step(self._observation(), 0.0, True, False)
        rows = self.rows
        touched = set()
        for dr, dc in cells:
            r, c = y + dr, x + dc
            line = rows[r]
            rows[r] = line[:c] + "#" + line[c + 1 :]
            touched.add(r)
            if r < top[c]:
                top[c] = r
        full = [r for r in touched if "." not in rows[r]]
        if full:
            kept = [line for r, line in enumerate(rows) if r not in full]
            self.rows = rows = [self.empty] * len(full) + kept
            self.lines += len(full)
            whole, height = "".join(rows), self.height
            self.top = [
                height if (r := whole[c :: self.width].find("#")) < 0 else r
                for c in range(self.width)
            ]
        self.placed += 1
        self.piece, self.next = self.next, self._draw()
        done = self.placed >= self.total
        return Step(self._observation(), float(len(full)), done, False)

    def _metrics(self) -> dict[str, float]:
        return {
            "score": self.lines / ((4 * self.total) // 10),
            "lines": float(self.lines),
            "placed": float(self.placed),
            "topped_out": 1.0 if self.topped else 0.0,
        }
