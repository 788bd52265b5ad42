"""The kit the written games share: parameters, the episode's life, the adapters, grid floods."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from evopolicy_mcp.adapters.protocol import AdapterError, available_adapters
from evopolicy_mcp.environments.graphs import GridMask, UnionFind
from evopolicy_mcp.environments.turns import Param, parse_options
from tests.support.games import InvalidAction, adapter, game


def test_parameters_get_defaults_and_bad_ones_are_refused_by_name() -> None:
    rules = {"size": Param(4, 3, 6, "side"), "mode": Param("a", choices=("a", "b"))}
    assert parse_options("g", rules, {"game": "g"}).as_dict() == {"size": 4, "mode": "a"}
    assert parse_options("g", rules, {"size": 6, "mode": "b"}).size == 6
    for bad, why in [
        ({"size": 7}, "size must be an integer in 3..6"),
        ({"size": True}, "size must be"),
        ({"size": "4"}, "size must be"),
        ({"mode": "c"}, "mode must be one of"),
        ({"colour": 1}, "unknown parameter"),
    ]:
        with pytest.raises(AdapterError, match=why):
            parse_options("g", rules, bad)


def test_adapters_name_their_games_and_refuse_unknown_ones() -> None:
    assert {"contests", "puzzles"} <= set(available_adapters())
    assert "ahc054" in adapter("contests").games and "2048" in adapter("puzzles").games
    with pytest.raises(AdapterError, match="game is missing; games: "):
        adapter("puzzles").spec({})
    with pytest.raises(AdapterError, match="'chess' is unknown"):
        adapter("puzzles").spec({"game": "chess"})
    with pytest.raises(AdapterError, match="size must be an integer in 3..6"):
        adapter("puzzles").make_episode({"game": "2048", "size": 9}, 0)


def test_listing_the_adapters_imports_no_game() -> None:
    code = (
        "import sys\n"
        "from evopolicy_mcp.adapters.protocol import load_adapter\n"
        "load_adapter('puzzles'); load_adapter('contests')\n"
        "print(sorted(m for m in sys.modules if '.puzzles.' in m or '.contests.' in m))\n"
        "load_adapter('puzzles').spec({'game': 'tetris'})\n"
        "print(sorted(m for m in sys.modules if '.puzzles.' in m))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after = out.stdout.splitlines()
    assert before == "[]" and after == "['evopolicy_mcp.environments.puzzles.tetris']"


def test_an_episode_lives_once_and_an_invalid_action_ends_it() -> None:
    g = game("puzzles", "sliding")
    with pytest.raises(AdapterError, match="reset\\(\\) first"):
        g.step(0)
    g.reset()
    with pytest.raises(AdapterError, match="reset\\(\\) on a running episode"):
        g.reset()
    with pytest.raises(InvalidAction):
        g.step(7)
    assert g.metrics()["invalid"] == 1.0 and g.report()["end"] == "invalid"
    assert "expected an int" in g.report()["invalid_action"]
    with pytest.raises(AdapterError, match="invalid episode"):
        g.step(0)
    g.close()
    g.close()


def test_floods_and_layers_on_bitmask_grids() -> None:
    grid = GridMask(3, 4)
    free = grid.full & ~(grid.bit(0, 1) | grid.bit(1, 1))  # a wall down column 1, open at row 2
    start = grid.bit(0, 0)
    assert grid.cells(grid.flood(start, free)) == sorted(
        (r, c) for r in range(3) for c in range(4) if (r, c) not in ((0, 1), (1, 1))
    )
    layers = grid.layers(start, free, stop=grid.bit(0, 2))
    assert [grid.cells(layer) for layer in layers[:3]] == [[(0, 0)], [(1, 0)], [(2, 0)]]
    assert layers[-1] & grid.bit(0, 2) and len(layers) == 7  # 6 steps: down, across, up
    assert grid.flood(grid.bit(0, 3), grid.full & ~grid.bit(1, 3) & ~grid.bit(0, 2)) == grid.bit(
        0, 3
    )


def test_union_find_agrees_with_a_plain_labelling() -> None:
    rng = random.Random(1)
    sets, labels = UnionFind(50), list(range(50))
    for _ in range(60):
        a, b = rng.randrange(50), rng.randrange(50)
        joined = sets.union(a, b)
        assert joined == (labels[a] != labels[b])
        old, new = labels[a], labels[b]
        labels = [new if x == old else x for x in labels]
    assert sets.sets == len(set(labels))
