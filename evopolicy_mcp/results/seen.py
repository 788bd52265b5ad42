"""What the agent saw of a run, rebuilt from the records with the host's public views.

Feedback is committed whole (``feedback.json``); the agent reads it through
:func:`~evopolicy_mcp.host.feedback_pages.episode_view`, which keeps nothing private and
hides the records' location in what a policy printed. The documents here are
made by that same function, whole (the agent reads long texts, reports and
traces one episode at a time with ``get_feedback(episode=N)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evopolicy_mcp.evaluation.feedback import Feedback
from evopolicy_mcp.host.feedback_pages import episode_view
from evopolicy_mcp.store.database import Store

__all__ = ["feedback_document", "read_feedback", "redactor"]

Redact = Callable[[str | None], str | None]


def redactor(store: Store) -> Redact:
    """The host's rule for texts a policy wrote: the records' path becomes ``<records>``."""
    root = str(store.data_dir)

    def redact(text: str | None) -> str | None:
        return text.replace(root, "<records>") if text else text

    return redact


def read_feedback(store: Store, run_id: str, submission_id: str) -> Feedback | None:
    text = store.read_feedback(run_id, submission_id)
    return Feedback.model_validate_json(text) if text is not None else None


def feedback_document(fb: Feedback, redact: Redact) -> dict[str, Any]:
    """A complete submission's feedback as the agent could read it."""
    return {
        "score": fb.score,
        "score_metric": fb.score_metric,
        "direction": fb.direction,
        "message": fb.summary_line(),
        "policy_failures": fb.policy_failures,
        "failures": dict(fb.failures),
        "metrics": dict(fb.metrics),
        "episode_summaries": [episode_view(s, redact).model_dump() for s in fb.episodes],
        "traces": [t.model_dump() for t in fb.traces],
    }
