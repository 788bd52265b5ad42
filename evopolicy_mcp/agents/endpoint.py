"""The run's MCP server as the launcher starts it: outside the agent's sandbox.

It is ``evopolicy-mcp serve --transport http`` in a process and session of its
own, listening on a loopback socket the launcher binds (an ephemeral port,
handed over as a descriptor, so no other process can take it in between) and
answering only requests that carry the run's bearer token. The data directory,
the tasks directories and the token reach it through its environment, not its
command line (``/proc/PID/cmdline`` is readable by every process, ``environ``
only by its owner and never from inside the agent's sandbox). The agent's
config holds the URL and the token, nothing of the records.

A sweep shares one such server between the runs it has going at once
(``RunServer(shared=True)``, ``serve --clients-from-stdin``), so that the
server's one executor shares the machine's workers fairly between them. Each
run gets a token of its own, bound through the server's stdin (never its
command line or environment) to that run and its workspace only, and dropped
when the run's agent session is over; the launcher of each run holds a
:class:`SharedRun`: the URL, its token, the server's pid.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from evopolicy_mcp.agents.config import Remote

from .procs import Pump

__all__ = ["RunServer", "ServerError", "SharedRun", "execution"]

START_TIMEOUT = 60.0
ADMIT_TIMEOUT = 30.0  # a binding sent on the server's stdin opens the server within this
STOP_TIMEOUT = 15.0  # longer than a host's own shutdown limit (Host.close_timeout, 10 s)
LOG_NAME = "server.log"


class ServerError(Exception):
    """The server did not start: the message is its last word."""


class RunServer:
    """One server process for one launch. ``bind()`` reserves the endpoint (the config
    needs it before anything runs), ``start()`` runs the server on it, ``stop()`` ends it.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        tasks_dirs: Sequence[Path] = (),
        task: str | None = None,
        run: str | None = None,
        isolation: str = "default",
        workers: int | None = None,
        executor: str = "thread",
        ray_address: str | None = None,
        program_root: Path | None = None,
        shared: bool = False,
    ) -> None:
        self.data_dir = data_dir
        self.program_root = program_root  # where submit_policy's program_dir may point
        self.tasks_dirs = tuple(tasks_dirs)
        self.task, self.run = task, run
        self.isolation, self.workers = isolation, workers
        self.executor, self.ray_address = executor, ray_address
        self.shared = shared  # runs (and their tokens) come on its stdin: admit()
        self.token = "" if shared else secrets.token_urlsafe(32)
        self.proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._pump: Pump | None = None
        self.log: Path | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def bind(self) -> Remote:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self.port = int(self._sock.getsockname()[1])
        return Remote(self.url, self.token)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def _argv(self, fd: int) -> list[str]:
        argv = [sys.executable, "-m", "evopolicy_mcp", "serve", "--transport", "http"]
        argv += ["--fd", str(fd)]
        if self.shared:
            argv += ["--clients-from-stdin"]
        elif self.task is not None and self.run is not None:
            argv += ["--task", self.task, "--run", self.run]
        argv += execution(self.executor, self.ray_address, self.workers, self.isolation)
        if self.program_root is not None and not self.shared:
            argv += ["--program-root", str(self.program_root)]
        return argv

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("EVOPOLICY_TOKEN", None)
        tasks = [p for p in env.get("EVOPOLICY_TASKS", "").split(os.pathsep) if p]
        tasks += [str(Path(d).expanduser().resolve()) for d in self.tasks_dirs]
        env.update(EVOPOLICY_DATA_DIR=str(self.data_dir), EVOPOLICY_TASKS=os.pathsep.join(tasks))
        if not self.shared:
            env["EVOPOLICY_TOKEN"] = self.token
        return env

    def start(self, log_dir: Path, timeout: float = START_TIMEOUT) -> None:
        """Run the server on the bound socket; return once it answers HTTP. Its output
        goes to ``log_dir/server.log`` (bounded)."""
        if self._sock is None:
            self.bind()
        assert self._sock is not None
        fd = self._sock.fileno()
        self.log = log_dir / LOG_NAME
        self.proc = subprocess.Popen(
            self._argv(fd),
            env=self._env(),
            stdin=subprocess.PIPE if self.shared else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(fd,),
            start_new_session=True,
        )
        self._sock.close()  # the server holds it now
        self._sock = None
        assert self.proc.stdout is not None
        self._pump = Pump(self.proc.stdout, self.log)
        self._pump.start()
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(self._last_word() or f"exit code {self.proc.returncode}")
            if _answers(self.port):
                return
            time.sleep(0.05)
        self.stop()
        raise ServerError(f"the server did not answer within {timeout:g} s")

    def _last_word(self) -> str:
        if self._pump is not None:
            self._pump.join(5.0)
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines() if self.log else []
        except OSError:
            return ""
        return lines[-1][:300] if lines else ""

    def admit(self, task: str, run: str, workspace: Path, timeout: float = ADMIT_TIMEOUT) -> str:
        """A shared server: bind a new token to run ``run`` of ``task``, its programs from
        ``workspace`` only; return the token once it opens the server."""
        assert self.shared and self.proc is not None and self.proc.stdin is not None
        token = secrets.token_urlsafe(32)
        self._send({"bind": token, "task": task, "run": run, "program_root": str(workspace)})
        deadline = time.monotonic() + timeout
        while _status(self.port, token) in (None, 401):
            if self.proc.poll() is not None:
                raise ServerError(self._last_word() or f"exit code {self.proc.returncode}")
            if time.monotonic() > deadline:
                raise ServerError(f"the server did not take run {run} (see {self.log})")
            time.sleep(0.05)
        return token

    def release(self, token: str) -> None:
        """A shared server: the token opens it no more (its run's session is over)."""
        if self.proc is not None and self.proc.poll() is None:
            self._send({"drop": token})

    def _send(self, message: dict[str, str]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError as exc:  # it died: admit() reports its last word
            raise ServerError(self._last_word() or f"the server is gone ({exc})") from None

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; the exit code."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self.proc is None:
            return None
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._pump is not None:
            self._pump.join(5.0)
        return self.proc.returncode


class SharedRun:
    """One run's place on a server its sweep shares between runs: the URL, the run's own
    token, the server's pid. The sweep starts and stops that server, and binds the token
    to this run and its workspace; ``start`` and ``stop`` here only check and let go."""

    shared = True

    def __init__(self, url: str, token: str, pid: int) -> None:
        self.url, self.token, self.pid = url, token, pid
        self.program_root: Path | None = None  # bound by the sweep

    def bind(self) -> Remote:
        return Remote(self.url, self.token)

    def start(self, log_dir: Path, timeout: float = START_TIMEOUT) -> None:
        if not self.alive():
            raise ServerError("the sweep's server is gone")

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        return None

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def execution(
    executor: str, ray_address: str | None, workers: int | None, isolation: str
) -> list[str]:
    """``serve``'s options for where and how episodes run, as arguments."""
    argv = []
    if executor != "thread":
        argv += ["--executor", executor]
    if ray_address:
        argv += ["--ray-address", ray_address]
    if workers is not None:
        argv += ["--workers", str(workers)]
    if isolation != "default":
        argv += ["--isolation", isolation]
    return argv


def _answers(port: int) -> bool:
    """Whether an HTTP server answers on 127.0.0.1:port (any status will do)."""
    return _status(port, None) is not None


def _status(port: int, token: str | None) -> int | None:
    """The HTTP status of a GET of /mcp on 127.0.0.1:port, with ``token`` if given."""
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    request = f"GET /mcp HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n{auth}\r\n".encode()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.settimeout(1.0)
            s.sendall(request)
            head = s.recv(12).split()
    except OSError:
        return None
    if len(head) < 2 or not head[0].startswith(b"HTTP/") or not head[1].isdigit():
        return None
    return int(head[1])
