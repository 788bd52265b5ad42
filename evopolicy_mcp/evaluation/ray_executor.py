"""The Ray executor: episodes on the actors of a Ray cluster (the ``[ray]`` extra).

Each actor holds a :class:`~evopolicy_mcp.evaluation.station.Station` on its
node: its own runner (template process, cgroups, scratch), on a CPU of that
node that no other station there has claimed, running one episode at a
time. The host keeps a thread per actor that hands it episodes from the
:class:`~evopolicy_mcp.evaluation.dispatch.Dispatcher` (fair between runs, as
with worker processes). What travels: a plan once per actor (the task as
JSON and the program as its content-addressed snapshot, which the node
stores only if its files hash to the digest) and each job's seeds; back, the
episode's outcome as JSON and raw bytes, checked against the feedback models.

The host stays the authority: budgets, the run secret, selection and records
never leave it, and a node learns an episode's seeds only with the job that
runs it. A node or actor lost mid-episode is a host fault: the episode runs
again on a new actor, and only an outcome that came back counts, once.
"""

from __future__ import annotations

import logging
import os
import tempfile
from typing import Any

from evopolicy_mcp.evaluation.dispatch import BackendLost, Dispatcher
from evopolicy_mcp.evaluation.plan import EvaluationAborted, Plan, unpack
from evopolicy_mcp.evaluation.processes import ONE_CORE
from evopolicy_mcp.evaluation.snapshot import Program, read_files, restore
from evopolicy_mcp.evaluation.station import Remote, Station, claim_cpu, pin
from evopolicy_mcp.kernel.sandbox import Isolation
from evopolicy_mcp.runner.template import Runner

__all__ = ["RAY_MISSING", "RayExecutor", "StationActor", "import_ray"]

log = logging.getLogger(__name__)

RAY_MISSING = "the ray executor needs Ray: install the extra with pip install 'evopolicy-mcp[ray]'"


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise EvaluationAborted(RAY_MISSING) from None
    return ray


class StationActor:
    """The body of one actor: a station on its node (made a Ray actor by the executor)."""

    def __init__(self, isolation_json: str) -> None:
        pin(claim_cpu())
        self.programs = tempfile.mkdtemp(prefix="evopolicy-ray-programs-")
        self.station = Station(Runner(isolation=Isolation.from_json(isolation_json)), self._program)

    def _program(self, description: dict[str, Any], blobs: list[bytes]) -> Program:
        names = description["files"]
        if not isinstance(names, list) or len(names) != len(blobs):
            raise KeyError("files")
        return restore(dict(zip(names, blobs, strict=True)), self.programs, description["digest"])

    def handle(self, request: bytes) -> bytes:
        return self.station.handle(request)

    def pid(self) -> int:
        return os.getpid()


class RayExecutor(Dispatcher):
    """One actor per CPU of the cluster (or ``actors``), each a station.

    ``address`` joins a running cluster (``ray start --head`` on a machine, ``ray
    start --address`` on the others); without it, a local cluster is started on
    127.0.0.1 for this process.

    Actors are placed node by node, as many on a node as it has CPUs (a lost node's
    replacements go to the nodes with the most CPUs left), and reserve no CPU in
    Ray's books: another process sharing the cluster (a server and its judging
    processes) gets actors on every CPU too, and each CPU's time is shared between
    them by the operating system, as worker processes of two hosts on one machine
    are. Within this process the dispatcher shares the actors fairly between runs.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        actors: int | None = None,
        isolation: Isolation | None = None,
    ) -> None:
        ray = import_ray()
        self.ray = ray
        self._started = False
        if not ray.is_initialized():
            if address:
                # A driver on the head's machine joins by loopback where the head listens there.
                local = address.rsplit(":", 1)[0] in ("127.0.0.1", "localhost")
                where = {"_node_ip_address": "127.0.0.1"} if local else {}
                ray.init(address=address, log_to_driver=False, **where)
            else:
                ray.init(
                    address="local",  # never a cluster another program left running
                    _node_ip_address="127.0.0.1",
                    include_dashboard=False,
                    log_to_driver=False,
                )
            self._started = True
        self.actors = actors or max(1, sum(self._node_cpus().values()))
        self.isolation = isolation or Isolation()
        self._remote = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)(StationActor)
        self._placed: dict[int, str] = {}  # slot -> node id
        super().__init__(self._start, self.actors, name="evopolicy-ray")

    def _node_cpus(self) -> dict[str, int]:
        return {
            node["NodeID"]: int(node.get("Resources", {}).get("CPU", 0))
            for node in self.ray.nodes()
            if node.get("Alive")
        }

    def _start(self, slot: int) -> _Actor:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        cpus = self._node_cpus()
        self._placed.pop(slot, None)
        taken = {node: 0 for node in cpus}
        for placed in self._placed.values():
            if placed in taken:
                taken[placed] += 1
        options: dict[str, Any] = {"runtime_env": {"env_vars": ONE_CORE}}
        if cpus:
            node = max(cpus, key=lambda n: cpus[n] - taken[n])
            self._placed[slot] = node
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=True)
        handle = self._remote.options(**options).remote(self.isolation.to_json())
        return _Actor(self.ray, handle)

    def actor_pids(self) -> list[int]:
        """The process ids of the live actors (tests; they may be on other machines)."""
        return [b.pid() for b in self.backends() if isinstance(b, _Actor)]

    def close(self) -> None:
        super().close()
        if self._started:
            self.ray.shutdown()


class _Actor(Remote):
    """The host's end of one actor."""

    grace = 120.0  # a node may be far away and busy

    def __init__(self, ray: Any, handle: Any) -> None:
        self.ray, self.handle = ray, handle
        self.closed = False

    def program(self, plan: Plan) -> tuple[dict[str, Any], list[bytes]]:
        files = read_files(plan.program)
        names = sorted(files)
        return {"digest": plan.program.digest, "files": names}, [files[n] for n in names]

    def ask(self, request: bytes, timeout: float) -> tuple[dict[str, Any], list[bytes]]:
        errors = self.ray.exceptions
        try:
            answer = self.ray.get(self.handle.handle.remote(request), timeout=timeout)
        except errors.GetTimeoutError:
            self.close()
            raise BackendLost("an actor did not answer in time") from None
        except (errors.RayActorError, errors.ActorUnavailableError) as exc:
            raise BackendLost(f"the actor or its node was lost: {type(exc).__name__}") from None
        if not isinstance(answer, bytes):
            raise BackendLost("an actor answered something other than bytes")
        return unpack(answer)

    def pid(self) -> int:
        return int(self.ray.get(self.handle.pid.remote(), timeout=30))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.ray.kill(self.handle)  # its template cleans up after it (parent-death signal)
        except Exception:
            log.debug("killing an actor", exc_info=True)
