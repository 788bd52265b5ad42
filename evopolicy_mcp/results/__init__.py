"""Results: what the operator takes away from runs.

Owns the summary of a run for comparison (``summary``: agent, confinement,
outcomes, budget, time, tokens read from the CLI's output by ``usage``), the
leaderboard over runs and repeats (``leaderboard``, with ``stats``), the
per-run HTML report (``page``, charts in ``charts``), the versioned rollout
dataset (``dataset``: its schema; ``export``: writing and reading bundles) and
the optional libraries these need (``extras``).

Everything here reads records and writes files for the operator; nothing is
served to an agent. Fields of the dataset that hold what the agent saw are
built with the host's public views, so nothing hidden rides along.

May import: ``tasks``, ``evaluation``, ``store``, ``host``. Never the MCP SDK,
the agents or the surfaces above.
"""

__all__: list[str] = []
