"""The adapter kit: what an environment plugin implements and what it builds on.

Owns the adapter protocol and its lazy entry-point loading (``protocol``), space
descriptions and strict action validation (``spaces``, ``actions``), and the
conformance checker behind ``evopolicy-mcp check-adapter`` (``conformance``).
An environment family is a small module on this kit (``environments``) or a
task file alone.

May import: nothing of the package; simulators only lazily, when a spec or an
episode is asked for (listing tasks imports none).
"""

from evopolicy_mcp.adapters.protocol import (
    ENTRY_POINT_GROUP,
    Adapter,
    AdapterError,
    EnvSpec,
    Episode,
    InvalidAction,
    Step,
    available_adapters,
    load_adapter,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "Adapter",
    "AdapterError",
    "EnvSpec",
    "Episode",
    "InvalidAction",
    "Step",
    "available_adapters",
    "load_adapter",
]
