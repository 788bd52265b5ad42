"""Crafter: open-world survival with 22 achievements (``adapter`` is the entry point).

``names`` holds Crafter's vocabulary, ``world`` everything that touches the
simulator, ``scoring`` the Crafter and survival scores, ``report`` per-episode
tallies, reports and replays.
"""

__all__: list[str] = []
