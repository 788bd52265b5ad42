"""Snake and Tetris: moves, growth, collisions, drops, line clears, scores."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from evopolicy_mcp.environments.puzzles import tetris
from tests.support.games import InvalidAction, game, play

UP, RIGHT, DOWN, LEFT = range(4)

# -- Snake ------------------------------------------------------------------------------


def test_the_snake_starts_in_the_middle_and_food_lands_on_a_free_cell() -> None:
    spots = np.zeros((10, 10))
    for seed in range(300):
        board = game("puzzles", "snake", seed=seed).reset()
        assert board[5].tolist()[3:6] == [1, 2, 3] and int((board > 0).sum()) == 3
        assert int((board == -1).sum()) == 1
        spots += board == -1
    assert spots[5, 3:6].sum() == 0 and (spots > 0).sum() > 80


def snake_with_food_at(cell: tuple[int, int], seed: int = 0) -> Any:
    g: Any = game("puzzles", "snake", seed=seed)
    g.reset()
    g.board[g.board == -1] = 0
    g.board[cell] = -1
    return g


def test_the_snake_moves_grows_on_food_and_encodes_its_body_by_age() -> None:
    g = snake_with_food_at((5, 7))
    board = g.step(RIGHT).observation
    assert board[5].tolist()[3:7] == [0, 1, 2, 3]
    step = g.step(RIGHT)
    assert step.reward == 1.0 and step.observation[5].tolist()[4:8] == [1, 2, 3, 4]
    assert g.metrics()["eaten"] == 1 and g.metrics()["score"] == pytest.approx(1 / 97)
    assert int((step.observation == -1).sum()) == 1


def test_walls_and_the_body_end_the_game_but_the_tail_cell_is_free() -> None:
    g = snake_with_food_at((0, 0))
    assert g.step(LEFT).terminated and g.metrics()["died"] == 1  # into its neck
    g = snake_with_food_at((0, 0))
    for action in (UP, LEFT, DOWN):
        assert not g.step(action).terminated  # a 2 x 2 loop: the head follows the tail
    g = snake_with_food_at((0, 0))
    for _ in range(4):
        g.step(RIGHT)
    assert g.step(RIGHT).terminated and g.metrics()["died"] == 1  # the right wall
    assert g.metrics()["steps"] == 5


def test_a_snake_that_never_eats_starves() -> None:
    g = snake_with_food_at((0, 0))
    loop = [UP, LEFT, DOWN, RIGHT]
    for t in range(200):
        step = g.step(loop[t % 4])
        if step.terminated:
            break
    assert t == 199 and g.metrics()["died"] == 0 and g.metrics()["eaten"] == 0


def test_the_snake_baseline_eats_and_replays_identically() -> None:
    first = play("puzzles", {"game": "snake"}, 6, "puzzles-snake")
    assert first == play("puzzles", {"game": "snake"}, 6, "puzzles-snake")
    assert first[0]["eaten"] >= 5


# -- Tetris -----------------------------------------------------------------------------


def test_pieces_have_their_distinct_rotations() -> None:
    distinct = {name: len(set(rotations)) for name, rotations in tetris.SHAPES.items()}
    assert distinct == {"I": 2, "O": 1, "T": 4, "S": 2, "Z": 2, "J": 4, "L": 4}
    assert all(len(cells) == 4 for rotations in tetris.SHAPES.values() for cells in rotations)
    assert tetris.SHAPES["T"][1] == ((0, 0), (1, 0), (1, 1), (2, 0))  # a quarter clockwise


def tetris_game(pieces: str, width: int = 4, height: int = 6) -> Any:
    g: Any = game("puzzles", "tetris", width=width, height=height, pieces=10)
    g.reset()
    queue = list(pieces)
    g.piece, g.next = queue.pop(0), queue.pop(0)
    g._draw = lambda: queue.pop(0) if queue else "O"
    return g


def test_pieces_drop_onto_the_surface_and_full_rows_clear() -> None:
    g = tetris_game("IOO")
    obs = g.step(0).observation  # I flat at column 0: fills the bottom row, which clears
    assert obs["board"] == ["...."] * 6 and g.metrics()["lines"] == 1
    obs = g.step(1).observation  # O at columns 1-2
    assert obs["board"][-2:] == [".##.", ".##."]
    obs = g.step(2).observation  # O at 2-3 rests on the first O
    assert obs["board"][-4:] == ["..##", "..##", ".##.", ".##."]
    assert obs["piece"] == "O" and obs["pieces_left"] == 7


def test_a_piece_past_the_right_edge_is_invalid_and_a_full_well_tops_out() -> None:
    g = tetris_game("IO")
    with pytest.raises(InvalidAction, match="past the right edge"):
        g.step(1)  # a flat I at column 1 of 4
    g = tetris_game("IIIIII")
    step = None
    for _ in range(2):
        step = g.step(4)  # upright I (rotation 1) in column 0: 4 rows, then 8 > 6
    assert step is not None and step.terminated and g.metrics()["topped_out"] == 1
    assert g.metrics()["placed"] == 1


def test_score_counts_lines_against_four_tenths_of_the_pieces() -> None:
    g = tetris_game("IIII", width=4)
    for _ in range(4):
        g.step(0)
    assert g.metrics()["lines"] == 4 and g.metrics()["score"] == pytest.approx(4 / 4)


def test_the_tetris_baseline_clears_lines_and_replays_identically() -> None:
    params = {"game": "tetris", "pieces": 60}
    first = play("puzzles", params, 1, "puzzles-tetris")
    assert first == play("puzzles", params, 1, "puzzles-tetris")
    assert first[0]["lines"] >= 5 and first[0]["placed"] == 60
