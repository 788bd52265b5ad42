"""evopolicy-mcp: evolve executable policies through MCP, scored on hidden episodes.

The public face, for users and adapter authors; every name is imported on first
use, so importing the package (as every policy process does) loads nothing::

    from evopolicy_mcp import EnvSpec, Step, InvalidAction, spaces   # an adapter
    from evopolicy_mcp import Host, build_server                        # embed the server
    from evopolicy_mcp import evaluate, get_task                        # run a program

The layers live in subpackages, each importing only those below it
(``tests/test_layers.py``): ``cli`` above ``server`` and ``agents``, above
``host``, above ``evaluation`` and ``store``, above ``runner``, ``adapters``,
``environments`` and ``tasks``, above ``kernel`` and ``policy`` (the ABI).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = [
    "Adapter",
    "AdapterError",
    "EnvSpec",
    "Episode",
    "Host",
    "InvalidAction",
    "PolicyContext",
    "Step",
    "Task",
    "__version__",
    "build_server",
    "check_adapter",
    "evaluate",
    "get_task",
    "load_tasks",
    "spaces",
]

_WHERE = {
    "Adapter": "evopolicy_mcp.adapters.protocol",
    "AdapterError": "evopolicy_mcp.adapters.protocol",
    "EnvSpec": "evopolicy_mcp.adapters.protocol",
    "Episode": "evopolicy_mcp.adapters.protocol",
    "InvalidAction": "evopolicy_mcp.adapters.protocol",
    "Step": "evopolicy_mcp.adapters.protocol",
    "check_adapter": "evopolicy_mcp.adapters.conformance",
    "PolicyContext": "evopolicy_mcp.policy",
    "Task": "evopolicy_mcp.tasks.model",
    "get_task": "evopolicy_mcp.tasks.model",
    "load_tasks": "evopolicy_mcp.tasks.model",
    "evaluate": "evopolicy_mcp.evaluation.episodes",
    "Host": "evopolicy_mcp.host.authority",
    "build_server": "evopolicy_mcp.server.app",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("evopolicy-mcp")
    if name == "spaces":
        return import_module("evopolicy_mcp.adapters.spaces")
    if name in _WHERE:
        return getattr(import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'evopolicy_mcp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
