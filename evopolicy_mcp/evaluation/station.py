"""A station: where a worker process or a Ray actor runs the episodes it is sent.

It owns a runner (its own template process, cgroups and scratch) and runs one
episode at a time, driving it with blocking waits: its policy process runs on
the station's CPU and the two take turns there. A request is a message
(:func:`~evopolicy_mcp.evaluation.plan.pack`) naming a plan and one job; the
plan itself comes along when the station does not know it yet. The answer is
the episode's outcome, or the host or adapter fault that aborted it. Both are
JSON and raw bytes: nothing is unpickled.

A station keeps the plans it was sent (a few, the latest) and nothing of a
job once it has answered: an episode's seeds are known here only while it runs.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from evopolicy_mcp.evaluation.dispatch import BackendLost
from evopolicy_mcp.evaluation.executor import ThreadExecutor, drive
from evopolicy_mcp.evaluation.loop import Episodes
from evopolicy_mcp.evaluation.plan import (
    EpisodeJob,
    EvaluationAborted,
    Outcome,
    Plan,
    WireError,
    decode_outcome,
    encode_outcome,
    pack,
    unpack,
)
from evopolicy_mcp.evaluation.snapshot import Program, ProgramError
from evopolicy_mcp.runner.template import Runner

__all__ = ["PLANS_KEPT", "Remote", "Station", "claim_cpu", "pin"]

PLANS_KEPT = 16
ProgramLoader = Callable[[dict[str, Any], list[bytes]], Program]


class Remote:
    """The host's end of a station elsewhere: a backend of the dispatcher.

    A request names the plan; a station that does not know it answers so, and the
    request goes again with the plan (and the program as :meth:`program` describes
    it) along. ``ask`` carries one request and its answer, raising
    :class:`~evopolicy_mcp.evaluation.dispatch.BackendLost` when the station is gone.
    """

    grace = 60.0  # beyond an episode's own deadlines, before a station is taken for hung

    def run(self, plan: Plan, job: EpisodeJob) -> Outcome:
        lim = plan.task.limits
        timeout = lim.startup_seconds + lim.episode_seconds + self.grace
        header: dict[str, Any] = {
            "plan": plan.key,
            "job": {"index": job.index, "env_seed": job.env_seed, "policy_seed": job.policy_seed},
        }
        answer, blobs = self.ask(pack(header), timeout)
        if "unknown_plan" in answer:
            program, files = self.program(plan)
            header["define"] = {**plan.header(), "program": program}
            answer, blobs = self.ask(pack(header, files), timeout)
        if "aborted" in answer:
            raise EvaluationAborted(str(answer["aborted"]))
        if "outcome" not in answer:
            raise BackendLost(f"a station answered {sorted(answer)[:4]}")
        return decode_outcome(answer["outcome"], blobs)

    def ask(self, request: bytes, timeout: float) -> tuple[dict[str, Any], list[bytes]]:
        raise NotImplementedError

    def program(self, plan: Plan) -> tuple[dict[str, Any], list[bytes]]:
        """How the station finds the plan's program, and the bytes sent along."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class Station:
    """Runs episodes on its runner. ``load_program(description, blobs)`` finds the
    program a plan names (a local snapshot, or files sent along)."""

    def __init__(self, runner: Runner, load_program: ProgramLoader) -> None:
        self.runner = runner
        self.load_program = load_program
        self.plans: OrderedDict[str, Episodes | EvaluationAborted] = OrderedDict()
        self.place = ThreadExecutor(1).placement(0)  # pinned to one CPU: the policy's too

    def handle(self, data: bytes) -> bytes:
        """One request -> one answer: ``outcome``, ``aborted`` or ``unknown_plan``."""
        header, blobs = unpack(data)
        key = str(header.get("plan"))
        if "define" in header:
            self._learn(key, header["define"], blobs)
        episodes = self.plans.get(key)
        if episodes is None:
            return pack({"unknown_plan": key})
        if isinstance(episodes, EvaluationAborted):
            return pack({"aborted": str(episodes)})
        try:
            raw = header["job"]
            job = EpisodeJob(
                index=int(raw["index"]),
                env_seed=int(raw["env_seed"]),
                policy_seed=int(raw["policy_seed"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise WireError(f"malformed job: {exc!r}"[:200]) from None
        try:
            outcome = drive(episodes.run(job, self.place))
        except EvaluationAborted as exc:
            return pack({"aborted": str(exc)})
        head, files = encode_outcome(outcome)
        return pack({"outcome": head}, files)

    def _learn(self, key: str, define: dict[str, Any], blobs: list[bytes]) -> None:
        entry: Episodes | EvaluationAborted
        try:
            program = self.load_program(define["program"], blobs)
            entry = Episodes(Plan.from_header(define, program), self.runner)
        except (ProgramError, OSError) as exc:
            entry = EvaluationAborted(f"host fault: the program cannot be opened here: {exc}")
        except EvaluationAborted as exc:
            entry = exc
        except KeyError as exc:
            raise WireError(f"malformed plan: no {exc}") from None
        self.plans[key] = entry
        while len(self.plans) > PLANS_KEPT:
            self.plans.popitem(last=False)


def pin(cpu: int | None) -> None:
    """Run this process (and what it starts from now on) on ``cpu`` alone."""
    if cpu is not None:
        try:
            os.sched_setaffinity(0, {cpu})
        except OSError:
            pass


def claim_cpu() -> int:
    """A CPU for a station that no one placed: the one of this process's CPUs that the
    fewest live stations on this machine have claimed (claims live in a locked file)."""
    cpus = sorted(os.sched_getaffinity(0))
    path = os.path.join(tempfile.gettempdir(), "evopolicy-cpu-claims.json")
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        try:
            claims = {int(pid): int(cpu) for pid, cpu in json.loads(f.read() or "{}").items()}
        except (ValueError, AttributeError):
            claims = {}
        live = {pid: cpu for pid, cpu in claims.items() if _alive(pid)}
        held = {cpu: 0 for cpu in cpus}
        for cpu in live.values():
            if cpu in held:
                held[cpu] += 1
        chosen = min(cpus, key=lambda c: (held[c], c))
        live[os.getpid()] = chosen
        f.seek(0)
        f.truncate()
        f.write(json.dumps(live))
    return chosen


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
