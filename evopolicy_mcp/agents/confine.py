"""What an agent CLI may reach, decided by the launcher; :mod:`.jail` applies it.

The agent gets: its workspace (read, write, execute); the system (``/usr``,
``/etc``, the libraries), its runtime (the CLI's install directory, Node, the
Python runtime, each ``PATH`` directory) to read and execute; its own config
home (login, settings) to read and write; ``/proc`` (its own processes, where
the ``pids`` layer works) to read; a few devices; a private ``/tmp``; and the
network. Nothing else: not the records, not other runs' workspaces, not the
tasks directories, not the rest of the operator's home, not the server or its
policy processes.

Modes: ``default`` applies every layer this machine gives (``doctor`` and
``agent check`` list them); ``strict`` refuses to start the agent when one is
missing; ``off`` (``--no-confine``) runs it unconfined. The run's record says
which (:attr:`Jail.record`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evopolicy_mcp.kernel.sandbox import Layer, runtime_paths
from evopolicy_mcp.tasks.model import task_dirs

from .jail import BOOT, LAYERS, JailSpec

__all__ = [
    "MODES",
    "ConfineError",
    "Jail",
    "Reach",
    "check_mode",
    "hidden_paths",
    "jail_for",
    "probe",
    "probe_text",
]

MODES = ("default", "strict", "off")
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
SYSTEM_EXTRA = ("/run/systemd/resolve",)  # where /etc/resolv.conf may point
DEVICES_RW = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts")
DEVICES_READ = ("/dev/random", "/dev/urandom")
RUNTIME_DIRS = {"bin", "sbin", "shims", ".bin"}  # a PATH entry named so: grant its parent
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # evopolicy_mcp/
PACKAGE_PARENT = os.path.dirname(PACKAGE)
PROBE_TIMEOUT = 30.0
WHAT = {
    "filesystem": "reads and executes limited to the system, the runtimes and the CLI's "
    "config; writes to the workspace, the config and the private /tmp; no tracing and "
    "no /proc/PID/environ, maps or mem of a process outside the sandbox",
    "signals": "no signal to, and no abstract Unix socket of, a process outside the sandbox",
    "privileges": "no capabilities, no_new_privs",
    "mounts": "a root of its own holding only what it is granted (read-only where it "
    "only reads) and a private /tmp and /dev/shm: no records, other workspaces, tasks, "
    "home directory or Unix sockets of the machine",
    "pids": "a PID namespace: only its own processes are visible, all end with the CLI",
}
WHY_MISSING = {
    "mounts": "run as root, or allow unprivileged user namespaces",
    "pids": "run as root, or allow unprivileged user namespaces",
    "filesystem": "needs Landlock (Linux >= 5.13 with landlock in lsm=)",
    "signals": "needs Landlock ABI 6 (Linux >= 6.12)",
}


class ConfineError(Exception):
    """Strict confinement asked for and a layer is missing (nothing was started)."""


def _jail_command() -> list[str]:
    """This interpreter running :mod:`.jail` quickly (see :data:`.jail.BOOT`)."""
    return [sys.executable, "-S", "-E", "-c", BOOT, PACKAGE_PARENT]


@functools.cache
def probe() -> dict[str, Layer]:
    """The agent sandbox's layers on this machine, tried in a throwaway jail. Cached."""
    try:
        out = subprocess.run(
            [*_jail_command(), "--probe"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            check=True,
        ).stdout
        found = {name: (bool(ok), str(text)) for name, (ok, text) in json.loads(out).items()}
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        found = {name: (False, f"the probe failed: {exc}") for name in LAYERS}
    layers = {}
    for name in LAYERS:
        ok, text = found.get(name, (False, "not tried"))
        if ok:
            detail = f"{WHAT[name]} ({text})"
        else:
            hint = WHY_MISSING.get(name)
            detail = f"{text}; {hint}" if hint else text
        layers[name] = Layer(name, ok, detail)
    return layers


def probe_text() -> str:
    """The layers as ``doctor`` and ``agent check`` print them."""
    return "\n".join(
        f"{'ok' if x.available else 'MISSING':>7}  {x.name:<11} {x.detail}"
        for x in probe().values()
    )


@dataclass(frozen=True)
class Reach:
    """What one agent may reach, before the layers are chosen."""

    workspace: Path
    executable: str  # the CLI, as found on the agent's PATH
    config: tuple[Path, ...] = ()  # the CLI's own config files and directories (read, write)
    hidden: tuple[Path, ...] = ()  # records, workspaces root, tasks directories


@dataclass
class Jail:
    """One agent's confinement: the spec for :mod:`.jail` (None when unconfined), the
    variables it adds, and its record for the run."""

    spec: JailSpec | None
    env: dict[str, str] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)
    scratch: Path | None = None  # a private temporary directory to remove afterwards

    @contextlib.contextmanager
    def command(self, argv: Sequence[str]) -> Iterator[tuple[list[str], tuple[int, ...]]]:
        """The command line that runs ``argv`` confined, and the descriptors to pass it.
        The spec travels through a pipe, so no path of it shows on a command line."""
        if self.spec is None:
            yield list(argv), ()
            return
        r, w = os.pipe()
        try:
            with os.fdopen(w, "w") as pipe:  # small: fits the pipe's buffer
                pipe.write(self.spec.to_json())
            yield [*_jail_command(), "--spec-fd", str(r), "--", *argv], (r,)
        finally:
            os.close(r)

    def close(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None


def _real(path: str | Path) -> str:
    return os.path.realpath(os.fspath(path))


def _beneath(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _install_root(executable: str) -> str:
    """The directory a program needs beside itself: its ``node_modules`` tree, the
    prefix of a ``bin`` directory, else its own directory."""
    real = _real(executable)
    parts = Path(real).parts
    if "node_modules" in parts:
        return str(Path(*parts[: len(parts) - parts[::-1].index("node_modules")]))
    parent = os.path.dirname(real)
    return os.path.dirname(parent) if os.path.basename(parent) in RUNTIME_DIRS else parent


class _Grants:
    """Paths to grant, each checked against the ones never to grant."""

    def __init__(self, hidden: Iterable[str], home: str) -> None:
        self.hidden = [_real(h) for h in hidden]
        self.home = _real(home)
        self.never = {"/", _real(tempfile.gettempdir()), "/tmp", self.home}
        self.read: dict[str, None] = {}
        self.write: dict[str, None] = {}
        self.links: dict[str, str] = {}  # symlinks on the way to a granted path

    def follow(self, path: str) -> None:
        """Note every symlink among ``path``'s components (the agent names paths as
        given, the grants are their real paths)."""
        here = "/"
        for part in os.path.normpath(os.path.abspath(path)).strip("/").split("/"):
            here = os.path.join(here, part)
            if os.path.islink(here):
                if here not in self.links:  # (a loop of links ends here)
                    self.links[here] = os.readlink(here)
                    self.follow(os.path.join(os.path.dirname(here), self.links[here]))
                here = os.path.realpath(here)

    def allowed(self, path: str) -> bool:
        if path in self.never or _beneath(self.home, path):  # the home or an ancestor of it
            return False
        return not any(_beneath(h, path) or _beneath(path, h) for h in self.hidden)

    def add(self, paths: Iterable[str], *, write: bool = False) -> None:
        for path in paths:
            if os.path.lexists(path):
                real = _real(path)
                if os.path.exists(real) and self.allowed(real):
                    (self.write if write else self.read)[real] = None
                    self.follow(path)

    def add_runtime(self, directory: str) -> None:
        """A PATH directory: its parent when it is a ``bin``-like one and may be granted."""
        real = _real(directory)
        parent = os.path.dirname(real)
        if os.path.basename(real) in RUNTIME_DIRS and self.allowed(parent):
            self.add([parent])
        else:
            self.add([real])


def hidden_paths(data_dir: Path, tasks_dirs: Sequence[Path]) -> tuple[Path, ...]:
    """What no agent reaches: the records, the default workspaces' root, the operator's
    task directories."""
    found = [data_dir, data_dir.parent / "evopolicy-workspaces"]
    found += task_dirs(tasks_dirs, builtin=False)
    return tuple(Path(_real(p)) for p in found if p.exists())


def _choose(mode: str) -> tuple[list[str], dict[str, str]]:
    """The layers to apply and the missing ones (name -> why); strict refuses."""
    found = probe()
    use = [n for n in LAYERS if found[n].available]
    missing = {n: found[n].detail for n in LAYERS if not found[n].available}
    if "filesystem" not in use and "signals" in use:
        use.remove("signals")
        missing["signals"] = "needs the filesystem layer"
    if missing and mode == "strict":
        why = "; ".join(f"{n}: {d}" for n, d in missing.items())
        raise ConfineError(f"--confine strict, but the agent sandbox lacks layers: {why}")
    return use, missing


def check_mode(mode: str) -> None:
    """Raise :class:`ConfineError` when ``mode`` cannot be had here (strict, a layer
    missing), before anything is created."""
    if mode not in MODES:
        raise ConfineError(f"unknown confinement {mode!r}; choose one of {', '.join(MODES)}")
    if mode != "off":
        _choose(mode)


def jail_for(mode: str, reach: Reach, env: Mapping[str, str]) -> Jail:
    """The confinement of one agent launch. Raises :class:`ConfineError` (strict only)."""
    check_mode(mode)
    if mode == "off":
        return Jail(None, record={"confined": False, "mode": "off", "layers": {}, "missing": {}})
    use, missing = _choose(mode)
    home = env.get("HOME") or os.path.expanduser("~")
    grants = _Grants((str(h) for h in reach.hidden), home)
    grants.add([*SYSTEM, *SYSTEM_EXTRA, *DEVICES_READ])
    grants.add(runtime_paths(str(h) for h in reach.hidden))
    grants.add([PACKAGE])  # the jail itself, the scripted agent and the connect proxy
    grants.add([_install_root(reach.executable)])
    node = shutil.which("node", path=env.get("PATH"))
    if node:
        grants.add([_install_root(node)])
    for entry in env.get("PATH", "").split(os.pathsep):
        if entry and os.path.isdir(entry):
            grants.add_runtime(entry)
    grants.add([str(p) for p in reach.config], write=True)
    grants.add(DEVICES_RW, write=True)
    grants.write[_real(reach.workspace)] = None  # even beneath the workspaces' root
    grants.follow(str(reach.workspace))
    jail = Jail(None)
    if "mounts" in use:
        grants.write.update(dict.fromkeys(("/tmp", "/dev/shm")))
        jail.env["TMPDIR"] = "/tmp"
    else:  # a temporary directory of its own instead of a private /tmp
        jail.scratch = Path(tempfile.mkdtemp(prefix="evopolicy-agent-"))
        grants.write[str(jail.scratch)] = None
        jail.env["TMPDIR"] = str(jail.scratch)
    read = [p for p in grants.read if p not in grants.write]
    jail.spec = JailSpec(
        layers=tuple(use),
        read=tuple(read),
        write=tuple(grants.write),
        proc=("/proc",),
        links=tuple(grants.links.items()),
    )
    found = probe()
    jail.record = {
        "confined": True,
        "mode": mode,
        "layers": {n: found[n].detail for n in use},
        "missing": missing,
    }
    return jail


def confinement_line(record: Mapping[str, Any]) -> str:
    """One line for a run's confinement record (reports, ``agent run``, ``agent check``)."""
    if not record:
        return "confinement not recorded"
    if not record.get("confined"):
        return "UNCONFINED (--no-confine): the agent could reach the records"
    layers = ", ".join(record.get("layers", {})) or "none"
    missing = ", ".join(record.get("missing", {}))
    mode = " strict" if record.get("mode") == "strict" else ""
    return f"confined{mode} ({layers})" + (f"; layers missing: {missing}" if missing else "")
