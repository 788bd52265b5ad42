"""NetHack through the NetHack Learning Environment, and MiniHack (``adapter`` holds the
two entry points).

``names`` holds NetHack's vocabulary (action keys, bottom-line fields, map codes),
``report`` the per-episode tallies and report, ``replay`` the text replays of traced
episodes, ``adapter`` the seeding and texts both families share.
"""

__all__: list[str] = []
