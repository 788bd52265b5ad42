"""The runner: the host's side of policy processes.

Owns the template process (``template.Runner``: start it, open one confined
policy process per episode, dispatch exit reports) and one episode's process as
the host sees it (``process.PolicyProcess``: frames, deadlines, failure codes,
captured output). Knows nothing of tasks, adapters or MCP.

May import: ``kernel``, the standard library and numpy.
"""

from evopolicy_mcp.kernel.limits import ProcessLimits
from evopolicy_mcp.runner.process import Failure, PolicyFailure, PolicyProcess, RunnerError
from evopolicy_mcp.runner.template import Runner

__all__ = ["Failure", "PolicyFailure", "PolicyProcess", "ProcessLimits", "Runner", "RunnerError"]
