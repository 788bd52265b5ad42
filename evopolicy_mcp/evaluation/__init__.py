"""Evaluation: one program over a list of episodes gives feedback.

Owns ``evaluate()`` (``episodes``), the episode loop (``loop``), what crosses an
executor (``plan``), the executors: one host thread (``executor``), worker
processes (``processes``), Ray actors (``ray_executor``), the fair queue of
places they share (``dispatch``, ``station``) and choosing one by name
(``executors``); feedback models (``feedback``), per-episode values and their
aggregate (``scoring``), content-addressed program snapshots (``snapshot``) and
seed derivation from a run secret (``seeds``).

May import: ``policy``, ``kernel``, ``runner``, ``adapters``, ``tasks``. Never the
host, the store or the MCP surface: evaluation has no notion of runs or budgets.
"""

from evopolicy_mcp.evaluation.episodes import EpisodeJob, EvaluationAborted, evaluate, jobs_for
from evopolicy_mcp.evaluation.executor import ThreadExecutor
from evopolicy_mcp.evaluation.feedback import EpisodeSummary, Feedback
from evopolicy_mcp.evaluation.plan import Executor
from evopolicy_mcp.evaluation.snapshot import Program, ProgramError, capture, capture_files

__all__ = [
    "EpisodeJob",
    "EpisodeSummary",
    "EvaluationAborted",
    "Executor",
    "Feedback",
    "Program",
    "ProgramError",
    "ThreadExecutor",
    "capture",
    "capture_files",
    "evaluate",
    "jobs_for",
]
