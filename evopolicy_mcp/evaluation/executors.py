"""Choosing an executor by name: ``thread``, ``process`` or ``ray``.

=========  ==========================================================  ==================
name       where episodes run                                          for
=========  ==========================================================  ==================
thread     one host thread per evaluation steps its episodes           cheap environments
process    host worker processes, one per CPU, each with its runner    every core of a machine
ray        Ray actors, one per CPU of the cluster, each with a runner  a cluster
=========  ==========================================================  ==================
"""

from __future__ import annotations

from evopolicy_mcp.evaluation.executor import ThreadExecutor
from evopolicy_mcp.evaluation.plan import Executor
from evopolicy_mcp.evaluation.processes import ProcessExecutor
from evopolicy_mcp.kernel.sandbox import Isolation
from evopolicy_mcp.runner.template import Runner

__all__ = ["EXECUTORS", "make_executor"]

EXECUTORS = ("thread", "process", "ray")


def make_executor(
    kind: str,
    *,
    workers: int | None = None,
    runner: Runner | None = None,
    isolation: Isolation | None = None,
    ray_address: str | None = None,
) -> Executor:
    """An executor of ``kind``. ``workers``: episodes at once (thread), worker processes
    (process) or actors (ray). ``runner`` serves the thread executor; the others make
    a runner per worker or actor with ``isolation`` (default: the runner's)."""
    isolation = isolation or (runner.isolation if runner is not None else None)
    if kind == "thread":
        return ThreadExecutor(workers, runner=runner)
    if kind == "process":
        return ProcessExecutor(workers, isolation=isolation)
    if kind == "ray":
        from evopolicy_mcp.evaluation.ray_executor import RayExecutor

        return RayExecutor(ray_address, actors=workers, isolation=isolation)
    raise ValueError(f"unknown executor {kind!r}; choose one of {', '.join(EXECUTORS)}")
