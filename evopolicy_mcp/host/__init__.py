"""The host: the authority over runs.

Owns runs, pools, budgets and finalize (``authority.Host``), the checks before a
charge (``admission``), background evaluation (``workers``), validation, selection
and assessment (``judge``, ``selection``), the selector grammar (``selectors``),
what the agent may see (``public``, ``views``, ``guide``), the operator's reports
(``reports``) and the one error an agent reads (``errors``).

May import: ``policy``, ``kernel``, ``runner``, ``adapters``, ``tasks``,
``evaluation``, ``store``. Never the MCP SDK or the surfaces above.
"""

from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.host.errors import ERROR_CODES, HostError

__all__ = ["ERROR_CODES", "Host", "HostError"]
