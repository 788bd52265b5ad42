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

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from evopolicy_mcp.evaluation.executor import ThreadExecutor
from evopolicy_mcp.evaluation.plan import Executor
from evopolicy_mcp.evaluation.processes import ProcessExecutor
from evopolicy_mcp.kernel.sandbox import Isolation
from evopolicy_mcp.runner.template import Runner

__all__ = ["EXECUTORS", "make_executor", "private_runtime"]

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


@contextmanager
def private_runtime(executor: Executor) -> Iterator[Executor]:
    """An executor like ``executor`` whose policy processes read the runtime from a
    private copy (:mod:`evopolicy_mcp.kernel.runtime`), for hidden splits: its own
    runner (or workers, or actors), made for the block and gone after it, with the
    copy. An executor of another kind is used as it is."""
    private: Executor
    runner = None
    if isinstance(executor, ThreadExecutor):
        base = executor.runner.isolation if executor.runner is not None else Isolation()
        runner = Runner(isolation=replace(base, private_runtime=True))
        private = ThreadExecutor(executor.workers, runner=runner)
    elif isinstance(executor, ProcessExecutor):
        isolation = replace(executor.isolation, private_runtime=True)
        private = ProcessExecutor(executor.workers, isolation=isolation, python=executor.python)
    else:
        from evopolicy_mcp.evaluation.ray_executor import RayExecutor

        if not isinstance(executor, RayExecutor):
            yield executor
            return
        isolation = replace(executor.isolation, private_runtime=True)
        private = RayExecutor(actors=executor.actors, isolation=isolation)
    try:
        yield private
    finally:
        private.close()
        if runner is not None:
            runner.close()
