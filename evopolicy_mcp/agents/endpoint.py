"""The run's MCP server as the launcher starts it: outside the agent's sandbox.

It is ``evopolicy-mcp serve --transport http`` in a process and session of its
own, listening on a loopback socket the launcher binds (an ephemeral port,
handed over as a descriptor, so no other process can take it in between) and
answering only requests that carry the run's bearer token. The data directory,
the tasks directories and the token reach it through its environment, not its
command line (``/proc/PID/cmdline`` is readable by every process, ``environ``
only by its owner and never from inside the agent's sandbox). The agent's
config holds the URL and the token, nothing of the records.
"""

from __future__ import annotations

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

__all__ = ["RunServer", "ServerError"]

START_TIMEOUT = 60.0
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
        program_root: Path | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.program_root = program_root  # where submit_policy's program_dir may point
        self.tasks_dirs = tuple(tasks_dirs)
        self.task, self.run = task, run
        self.isolation, self.workers = isolation, workers
        self.token = secrets.token_urlsafe(32)
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

    def _argv(self, fd: int) -> list[str]:
        argv = [sys.executable, "-m", "evopolicy_mcp", "serve", "--transport", "http"]
        argv += ["--fd", str(fd)]
        if self.task is not None and self.run is not None:
            argv += ["--task", self.task, "--run", self.run]
        if self.isolation != "default":
            argv += ["--isolation", self.isolation]
        if self.workers is not None:
            argv += ["--workers", str(self.workers)]
        if self.program_root is not None:
            argv += ["--program-root", str(self.program_root)]
        return argv

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        tasks = [p for p in env.get("EVOPOLICY_TASKS", "").split(os.pathsep) if p]
        tasks += [str(Path(d).expanduser().resolve()) for d in self.tasks_dirs]
        env.update(
            EVOPOLICY_DATA_DIR=str(self.data_dir),
            EVOPOLICY_TOKEN=self.token,
            EVOPOLICY_TASKS=os.pathsep.join(tasks),
        )
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
            stdin=subprocess.DEVNULL,
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

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; the exit code."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self.proc is None:
            return None
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


def _answers(port: int) -> bool:
    """Whether an HTTP server answers on 127.0.0.1:port (any status will do)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.settimeout(1.0)
            s.sendall(b"GET /mcp HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            return s.recv(5) == b"HTTP/"
    except OSError:
        return False
