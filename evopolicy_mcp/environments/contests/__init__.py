"""Heuristic-contest problems as episodes: one test case per episode, the problem's own
generator and score, one turn (or one decision) per step.

``make_adapter()`` serves them as adapter ``contests`` with parameter ``game``:
``ahc054`` (Treant's Forest), ``ahc058`` (Apple Incremental Game), ``ahc007`` (Online
MST), ``ahc015`` (Halloween Candy), ``ahc046`` (Skating with Blocks) and
``codechef-minesweeper`` (CodeChef MINESWPR). The rules come from the public problem
statements (cited in each module and task); the code is ours.
"""

from __future__ import annotations

from evopolicy_mcp.environments.turns import GameAdapter

__all__ = ["GAMES", "make_adapter"]

GAMES = {
    "ahc007": "evopolicy_mcp.environments.contests.ahc007",
    "ahc015": "evopolicy_mcp.environments.contests.ahc015",
    "ahc046": "evopolicy_mcp.environments.contests.ahc046",
    "ahc054": "evopolicy_mcp.environments.contests.ahc054",
    "ahc058": "evopolicy_mcp.environments.contests.ahc058",
    "codechef-minesweeper": "evopolicy_mcp.environments.contests.minesweeper",
}


def make_adapter() -> GameAdapter:
    return GameAdapter("contests", GAMES, example="ahc058")
