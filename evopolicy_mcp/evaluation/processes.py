"""The process executor: episodes on every core, in host worker processes.

Each worker is a process of the host's own (same interpreter, same installed
plugins) pinned to one CPU, with a :class:`~evopolicy_mcp.evaluation.station.Station`:
its own runner (template process, cgroups, scratch) whose policy processes
run on that CPU too, one episode at a time. The environments' Python work,
which needs a GIL, so spreads over as many cores as there are workers
(default: one per CPU). The host keeps a thread per worker that hands it
episodes from the :class:`~evopolicy_mcp.evaluation.dispatch.Dispatcher`, so
evaluations that run at once share the workers fairly.

What crosses to a worker: the plan (the program's snapshot path and digest,
which the worker re-opens and checks; the task as JSON) and each job's seeds;
back: the episode's outcome as JSON and raw file bytes, checked against the
feedback models. Nothing is pickled either way. A worker that dies (killed,
out of memory) is a host fault: its episode runs again on a new worker.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from evopolicy_mcp.evaluation.dispatch import BackendLost, Dispatcher
from evopolicy_mcp.evaluation.plan import Plan, receive, send, unpack
from evopolicy_mcp.evaluation.snapshot import Program, open_program
from evopolicy_mcp.evaluation.station import Remote, Station, pin
from evopolicy_mcp.kernel import confine
from evopolicy_mcp.kernel.sandbox import Isolation
from evopolicy_mcp.runner.template import Runner

__all__ = ["ProcessExecutor", "default_process_workers", "main"]


# A worker is one core's worth of work: numerical libraries must not start threads of
# their own that spin on the other workers' cores.
ONE_CORE = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def default_process_workers(cpus: int) -> int:
    """Workers by default: one per CPU (each steps its environments and hands over to
    its policy processes on that CPU)."""
    return max(1, cpus)


class ProcessExecutor(Dispatcher):
    """``workers`` host worker processes (default: one per CPU), each on its own CPU.

    ::

        with ProcessExecutor(4) as pool:
            feedback = evaluate(program, task, jobs, executor=pool)
    """

    def __init__(
        self,
        workers: int | None = None,
        *,
        isolation: Isolation | None = None,
        python: str | None = None,
    ) -> None:
        self.cpus = sorted(os.sched_getaffinity(0))
        self.workers = workers or default_process_workers(len(self.cpus))
        self.isolation = isolation or Isolation()
        self.python = python or sys.executable
        super().__init__(self._start, self.workers, name="evopolicy-worker")

    def _start(self, slot: int) -> _Worker:
        return _Worker(self.python, self.isolation, self.cpus[slot % len(self.cpus)])

    def worker_pids(self) -> list[int]:
        """The running workers' process ids (operator views, tests)."""
        return [b.proc.pid for b in self.backends() if isinstance(b, _Worker)]


class _Worker(Remote):
    """The host's end of one worker process."""

    def __init__(self, python: str, isolation: Isolation, cpu: int) -> None:
        host_end, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # A folder of its own to run in: simulators that write where they run (ViZDoom's
        # engine makes `./_vizdoom/`) write there, and it goes with the worker.
        self.home = tempfile.mkdtemp(prefix="evopolicy-worker-")
        package_parent = str(Path(__file__).resolve().parents[2])
        bootstrap = (
            f"import sys; sys.path.insert(0, {package_parent!r}); "
            "from evopolicy_mcp.evaluation.processes import main; main()"
        )
        try:
            self.proc = subprocess.Popen(
                [
                    python,
                    "-P",
                    "-c",
                    bootstrap,
                    str(worker_end.fileno()),
                    str(os.getpid()),
                    str(cpu),
                    isolation.to_json(),
                ],
                pass_fds=(worker_end.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # stdout may be the MCP wire
                cwd=self.home,
                env={**os.environ, **ONE_CORE},
                # Its own process group: what its simulators start (a Doom engine per
                # reused environment) is ended with it, whatever way it ended.
                start_new_session=True,
            )
        finally:
            worker_end.close()
        self.sock = host_end
        self.closed = False

    def program(self, plan: Plan) -> tuple[dict[str, Any], list[bytes]]:
        return {"digest": plan.program.digest, "path": str(plan.program.path)}, []

    def ask(self, request: bytes, timeout: float) -> tuple[dict[str, Any], list[bytes]]:
        self.sock.settimeout(timeout)
        try:
            send(self.sock, request)
            answer = receive(self.sock)
        except TimeoutError:
            raise BackendLost(f"worker {self.proc.pid} did not answer in time") from None
        except OSError as exc:
            answer = None
            if self.closed:
                raise BackendLost("the executor was closed") from exc
        if answer is None:
            raise BackendLost(f"worker {self.proc.pid} died ({self._status()})")
        return unpack(answer)

    def _status(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "still running"
        if code < 0:
            return f"signal {signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else -code}"
        return f"exit status {code}"

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # a worker between episodes exits on EOF
        except OSError:
            pass
        self.sock.close()
        self.proc.terminate()  # one in an episode ends it, and its runner, at once
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # its template cleans up after it (parent-death signal)
            self.proc.wait()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # engines its environments started
        except (ProcessLookupError, PermissionError):
            pass
        shutil.rmtree(self.home, ignore_errors=True)


def _local_program(description: dict[str, Any], _blobs: list[bytes]) -> Program:
    """A plan's program: the host's snapshot, re-opened and checked against its digest."""
    path = Path(str(description["path"]))
    return open_program(path.parent, str(description["digest"]))


def _stop(*_: object) -> None:
    raise SystemExit(0)  # through the episode's and the runner's clean-up


def main() -> None:
    """A worker process: serve the host's requests until it closes the connection."""
    fd, host_pid, cpu = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    confine.prctl(confine.PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != host_pid:
        os._exit(0)  # the host died before the parent-death signal was armed
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the operator's ^C is the host's to handle
    signal.signal(signal.SIGTERM, _stop)
    pin(cpu)
    sock = socket.socket(fileno=fd)
    runner = Runner(isolation=Isolation.from_json(sys.argv[4]))
    station = Station(runner, _local_program)
    try:
        while (request := receive(sock)) is not None:
            send(sock, station.handle(request))
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        runner.close()
