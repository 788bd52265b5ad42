"""2048, the sliding-tile puzzle and Rubik's cube: rules, generators, scores, invalid moves."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from evopolicy_mcp.environments.puzzles import cube, g2048, sliding
from tests.support.games import InvalidAction, game, play

# -- 2048 ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "slid", "points"),
    [
        ([1, 1, 2, 0], [2, 2, 0, 0], 4),  # 2 2 4 . -> 4 4: a new 4 does not merge again
        ([2, 2, 2, 2], [3, 3, 0, 0], 16),
        ([1, 0, 1, 1], [2, 1, 0, 0], 4),  # the pair nearest the side merges first
        ([0, 0, 0, 3], [3, 0, 0, 0], 0),
        ([1, 2, 1, 2], [1, 2, 1, 2], 0),
    ],
)
def test_a_line_slides_and_merges_once_per_move(row: list, slid: list, points: int) -> None:
    assert g2048.slide(bytes(row)) == (bytes(slid), points)


def test_moves_slide_toward_their_side() -> None:
    start = [1, 1, 2, 0, 1, 0, 0, 0, 1, 0, 1, 0, 2, 2, 2, 2]
    results = {}
    for direction in range(4):
        board = bytearray(start)
        results[direction] = (g2048.move(board, 4, direction), list(board))
    assert results[3] == (24, [2, 2, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 3, 0, 0])
    assert results[1] == (24, [0, 0, 2, 2, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 3, 3])
    assert results[0] == (4, [2, 1, 2, 2, 1, 2, 1, 0, 2, 0, 2, 0, 0, 0, 0, 0])
    assert results[2] == (4, [0, 0, 0, 0, 1, 0, 2, 0, 2, 1, 1, 0, 2, 2, 2, 2])
    still = bytearray([1, 2, 1, 2] * 4)
    assert g2048.move(still, 4, 3) == -1 and list(still) == [1, 2, 1, 2] * 4


def test_tiles_appear_as_the_game_draws_them() -> None:
    twos = fours = 0
    for seed in range(400):
        board = game("puzzles", "2048", seed=seed).reset()
        assert int((board > 0).sum()) == 2
        twos += int((board == 2).sum())
        fours += int((board == 4).sum())
    assert abs(twos / (twos + fours) - 0.9) < 0.03


def test_a_move_that_changes_nothing_is_invalid() -> None:
    g = game("puzzles", "2048")
    g.reset()
    g.board[:] = bytes([1, 2, 1, 2, 2, 1, 2, 1] + [0] * 8)
    with pytest.raises(InvalidAction, match="changes nothing"):
        g.step(0)
    assert g.metrics()["invalid"] == 1.0


def test_the_game_ends_when_no_move_is_left_and_scores_its_points() -> None:
    g = game("puzzles", "2048", size=3)
    g.reset()
    g.board[:] = bytes([1, 1, 2, 3, 4, 5, 6, 7, 0])
    g.rng.seed(1)
    step = g.step(3)  # left: 2 2 merge into 4 (+4); a tile spawns in one of the two holes
    assert step.reward == 4.0 and g.metrics()["score"] == 4.0
    g.board[:] = bytes([1, 2, 3, 4, 5, 6, 7, 8, 0])
    step = g.step(1)  # right: row 3 slides; the 2 or 4 spawned at (2, 0) leaves no pair
    assert step.terminated and g2048.stuck(g.board, 3) and g.metrics()["moves"] == 2


def test_the_2048_baseline_replays_identically() -> None:
    first = play("puzzles", {"game": "2048"}, 5, "puzzles-2048")
    assert first == play("puzzles", {"game": "2048"}, 5, "puzzles-2048")
    assert first[0]["score"] > 200 and first[0]["max_tile"] >= 64


# -- sliding tiles ----------------------------------------------------------------------


def test_solvability_matches_a_search_of_every_2x2_and_3x3_by_parity() -> None:
    goal = (1, 2, 3, 0)
    reached, frontier = {goal}, [goal]
    while frontier:  # every arrangement reachable from the goal on 2 x 2
        nxt = []
        for state in frontier:
            k = state.index(0)
            for j in (k ^ 1, k ^ 2):
                s = list(state)
                s[k], s[j] = s[j], 0
                if tuple(s) not in reached:
                    reached.add(tuple(s))
                    nxt.append(tuple(s))
        frontier = nxt
    for perm in itertools.permutations(range(4)):
        assert sliding.solvable(list(perm), 2) == (perm in reached)
    assert sliding.solvable([1, 2, 3, 4, 5, 6, 8, 7, 0], 3) is False
    assert sliding.solvable([*range(1, 14), 15, 14, 0], 4) is False  # Sam Loyd's 14-15
    assert sliding.solvable([*range(1, 16), 0], 4)


@pytest.mark.parametrize("size", [3, 4])
def test_starts_are_solvable_and_spread_over_the_board(size: int) -> None:
    blanks = np.zeros(size * size)
    for seed in range(300):
        tiles = sliding.generate(size, seed)
        assert sorted(tiles) == list(range(size * size)) and sliding.solvable(tiles, size)
        blanks[tiles.index(0)] += 1
    assert blanks.min() > 300 / size**2 / 3


def test_moves_score_and_invalid_moves() -> None:
    near = [1, 2, 3, 4, 5, 6, 7, 0, 8]  # one move from the goal, the blank at (2, 1)
    with pytest.raises(InvalidAction, match="cannot go down"):
        game_with(near).step(1)
    g = game_with(near)
    g.step(2)  # the blank goes left (7 slides right), then back, then right: solved
    g.step(3)
    step = g.step(3)
    assert step.terminated and g.metrics()["solved"] == 1 and g.metrics()["moves"] == 3
    assert step.reward == g.metrics()["score"] == pytest.approx(1 / 3)  # Manhattan bound 1


def game_with(tiles: list) -> Any:
    g: Any = game("puzzles", "sliding")
    g.reset()
    g.tiles[:] = bytes(tiles)
    g.blank = tiles.index(0)
    g.bound = sliding.manhattan(tiles, 3)
    return g


def test_the_sliding_baseline_solves_and_replays_identically() -> None:
    first = play("puzzles", {"game": "sliding"}, 3, "puzzles-sliding")
    assert first == play("puzzles", {"game": "sliding"}, 3, "puzzles-sliding")
    assert first[0]["solved"] == 1 and 0 < first[0]["score"] <= 1


# -- Rubik's cube -------------------------------------------------------------------------


def test_face_turns_form_the_cube_group() -> None:
    solved = cube.SOLVED
    for move in range(18):
        state, order = solved, 0
        while True:
            state, order = cube.apply(state, move), order + 1
            if state == solved:
                break
        assert order == (2 if move % 3 == 1 else 4)
        assert all(cube.apply(solved, move)[9 * f + 4] == f for f in range(6))  # centres stay
    state = solved
    for k in range(1, 7):
        for move in (3, 0, 5, 2):  # R U R' U'
            state = cube.apply(state, move)
        assert (state == solved) == (k == 6)


def test_u_moves_the_front_top_row_to_the_left_face() -> None:
    turned = cube.apply(cube.SOLVED, 0)
    assert list(turned[36:39]) == [2, 2, 2]  # L's top row shows F's colour
    assert list(turned[18:21]) == [1, 1, 1]  # F's shows R's
    front = cube.apply(cube.SOLVED, 6)  # F: U's bottom row goes to R's left column
    assert [front[i] for i in (9, 12, 15)] == [0, 0, 0]


def test_scrambles_are_canonical_and_undoing_one_scores_1() -> None:
    for seed in range(50):
        moves = cube.scramble(7, seed)
        assert len(moves) == 7
        for a, b in zip(moves, moves[1:], strict=False):
            assert a // 3 != b // 3 and not (a // 3 % 3 == b // 3 % 3 and b // 3 > a // 3)
    moves = cube.scramble(6, 3)
    g = game("puzzles", "cube", seed=3, depth=6)
    g.reset()
    step = None
    for m in reversed(moves):
        step = g.step(m - m % 3 + 2 - m % 3)  # the inverse turn
    assert step is not None and step.terminated and g.metrics()["score"] == 1.0
    longer = game("puzzles", "cube", seed=3, depth=6)
    longer.reset()
    for m in [0, 2] + [m - m % 3 + 2 - m % 3 for m in reversed(moves)]:
        longer.step(m)
    assert longer.metrics()["score"] == pytest.approx(6 / 8)


def test_the_cube_baseline_solves_short_scrambles_and_replays_identically() -> None:
    first = play("puzzles", {"game": "cube", "depth": 5}, 2, "puzzles-cube")
    assert first == play("puzzles", {"game": "cube", "depth": 5}, 2, "puzzles-cube")
    assert first[0]["solved"] == 1 and first[0]["score"] == 1.0
