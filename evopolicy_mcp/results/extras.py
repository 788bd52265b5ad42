"""The optional libraries of the results commands, and the message when one is missing.

``plotly`` draws the HTML report's charts (its ``plotly.min.js`` is inlined, so
a report opens offline); ``pyarrow`` writes and reads Parquet. Both come with
the ``results`` extra; JSON-lines export and the text leaderboard need neither.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXTRA", "MissingExtra", "require"]

EXTRA = "results"


class MissingExtra(Exception):
    """An optional library is not installed; the message says what to install."""


def require(module: str, purpose: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtra(
            f"{purpose} needs {module.split('.')[0]}, which is not installed: "
            f"pip install 'evopolicy-mcp[{EXTRA}]'"
        ) from None
