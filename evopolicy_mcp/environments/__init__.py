"""The built-in environment plugins, registered through the same entry-point group
(``evopolicy_mcp.environments``) a third-party package uses.

``gymnasium_adapter`` (with the texts of ``gymnasium_catalog``) serves Gymnasium
ids; ``crafter`` is the Crafter family (world, scoring, report and replays);
``contests`` and ``puzzles`` are games written here on the turn-based kit of
``turns`` and ``graphs``.

May import: ``adapters`` (the kit) and the simulators, lazily. Nothing imports
these modules but the entry points.
"""

__all__: list[str] = []
