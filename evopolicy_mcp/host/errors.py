"""The one exception an agent ever reads: :class:`HostError`.

``code`` names the rule that refused the request (stable, for tests and
clients); ``message`` is written for the agent and says what to do next. A
message never holds a seed, the run secret, a host path or a hidden result.
"""

from __future__ import annotations

__all__ = ["ERROR_CODES", "HostError"]

ERROR_CODES = frozenset(
    {
        "unknown_task",
        "unknown_run",
        "unknown_submission",
        "bad_selector",
        "out_of_pool",
        "over_budget",
        "over_cap",
        "would_strand_budget",
        "budget_left",
        "submission_limit",
        "run_closed",
        "time_up",
        "program_invalid",
        "bad_candidates",
        "run_limit",
        "bound_run",
        "bad_episode",
        "bad_page",
        "task_unavailable",
        "unknown_artifact",
    }
)


class HostError(Exception):
    """A request the rules refuse. ``message`` is written for the agent: it says what to do."""

    def __init__(self, code: str, message: str) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown HostError code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
