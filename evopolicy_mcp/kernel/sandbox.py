"""The sandbox of a policy process: what it can reach besides its frame pipes.

Layers, each detected by :func:`probe` and chosen by :class:`Isolation`:

- ``filesystem`` (Landlock): read and execute the policy runtime (the
  standard library, numpy, the interpreter and the shared libraries they
  load: :mod:`evopolicy_mcp.kernel.runtime`); read the program snapshot, ``/proc/self`` and a few
  devices; read and write the episode's scratch directory. Every other open,
  listing, creation, rename or removal fails with EACCES: the data directory,
  $HOME, the rest of /tmp, the tasks, the agent's workspace, other processes'
  /proc entries. Landlock does not cover metadata: ``stat`` of any path works,
  and chmod/chown/utime/xattr are left to the ``syscalls`` layer.
- ``disk``: the template moves itself once into a private mount namespace and
  mounts a tmpfs of its own on each episode's scratch directory, as big as
  :class:`~evopolicy_mcp.kernel.limits.ProcessLimits` says (``disk_bytes``,
  ``disk_files``), before the episode's process is forked: filling it ends in
  ENOSPC for that episode alone, nothing reaches the machine's disk, and
  unmounting it at the end frees everything. The mounts never show in the
  machine's mount table and go away with the template. In that namespace
  every mount is ``noatime``: reading a file leaves no access time behind.
- ``network``: the template moves itself once into a new network and IPC
  namespace with no interface up; its policy processes inherit it, so an
  episode pays nothing for it (creating one per process costs ~0.8 ms here).
  From Landlock ABI 4, TCP bind and connect are denied as well.
- ``signals`` (Landlock ABI 6 scopes): no signal to, and no abstract Unix
  socket of, any process outside the episode.
- ``privileges``: every capability dropped; as root the process keeps uid 0
  but can no longer raise its limits, join namespaces, mount or trace.
- ``syscalls``: the seccomp filter of :mod:`evopolicy_mcp.kernel.linux`: no sockets,
  metadata changes, IPC objects, tracing or namespaces, and the calls that change
  a process's limits or scheduling (``prlimit``, ``setpriority``, ``sched_set*``)
  on the caller only: processes of the same uid may change each other's. No
  inotify/fanotify, file leases, pipe growing or sessions, and ``setpgid`` into a
  new group only.
- ``memory`` and ``processes`` (cgroups, :mod:`evopolicy_mcp.kernel.cgroups`): each
  episode's processes share a memory cgroup of its address-space limit plus
  its scratch quota, swap included (memfd, tmpfs and pipe contents count,
  which ``RLIMIT_AS`` does not see; an OOM kill there ends the episode as
  ``resource_limit``), and a pids cgroup of ``ProcessLimits.processes``
  inside the server's cap. The template makes them when it forks a spare.

:func:`prepare` runs once in the template (opens the runtime paths as O_PATH
descriptors, builds the filter, enters the namespaces). In each forked child,
:meth:`Sandbox.begin` does the episode-independent part (a spare process
does it while it waits) and :meth:`Sandbox.enter` adds the program and
scratch directories and seals the process, before any program code.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from evopolicy_mcp.kernel import cgroups, linux
from evopolicy_mcp.kernel.limits import ProcessLimits
from evopolicy_mcp.kernel.runtime import policy_runtime

__all__ = ["LAYERS", "Isolation", "Layer", "Probe", "Sandbox", "SandboxError", "prepare", "probe"]

LAYERS = (
    "filesystem",
    "disk",
    "network",
    "signals",
    "privileges",
    "syscalls",
    "memory",
    "processes",
)
CGROUP_LAYERS = {"memory": "memory", "processes": "pids"}  # layer -> cgroup controller

READ_ONLY = linux.READ_FILE | linux.READ_DIR
RUNTIME = linux.EXECUTE | READ_ONLY
SCRATCH = READ_ONLY | linux.WRITE_FILE | linux.TRUNCATE | linux.MAKE_REG | linux.MAKE_DIR
SCRATCH |= linux.MAKE_SYM | linux.MAKE_FIFO | linux.REMOVE_FILE | linux.REMOVE_DIR | linux.REFER
# (no devices, sockets or executables in scratch)
DEVICES = {"/dev/null": linux.READ_FILE | linux.WRITE_FILE | linux.TRUNCATE}
DEVICES |= dict.fromkeys(("/dev/urandom", "/dev/random", "/dev/zero"), linux.READ_FILE)


class SandboxError(Exception):
    """A requested layer is missing in strict mode."""


@dataclass(frozen=True)
class Isolation:
    """Which layers policy processes get; ``strict`` refuses to run without any of them.

    ``hidden`` names paths that must stay unreadable even where they lie inside
    the Python runtime (the data directory, tasks directories, workspaces): a
    runtime directory that contains one of them is not granted at all.

    ``private_runtime``: policy processes read the runtime from a private copy
    (:mod:`evopolicy_mcp.kernel.runtime`), as hidden splits do.
    """

    filesystem: bool = True
    disk: bool = True
    network: bool = True
    signals: bool = True
    privileges: bool = True
    syscalls: bool = True
    memory: bool = True
    processes: bool = True
    strict: bool = False
    hidden: tuple[str, ...] = ()
    private_runtime: bool = False

    @classmethod
    def none(cls) -> Isolation:
        return cls(
            filesystem=False,
            disk=False,
            network=False,
            signals=False,
            privileges=False,
            syscalls=False,
            memory=False,
            processes=False,
        )

    def requested(self) -> list[str]:
        return [name for name in LAYERS if getattr(self, name)]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Isolation:
        data = json.loads(text)
        return cls(**{**data, "hidden": tuple(data.get("hidden", ()))})


@dataclass(frozen=True)
class Layer:
    name: str
    available: bool
    detail: str  # what it does here, or why it is missing and what to do


@dataclass(frozen=True)
class Probe:
    """What this machine offers, from :func:`probe`."""

    layers: dict[str, Layer]
    landlock_abi: int = 0
    notes: list[str] = field(default_factory=list)

    def missing(self, isolation: Isolation) -> list[Layer]:
        return [self.layers[n] for n in isolation.requested() if not self.layers[n].available]

    def text(self) -> str:
        lines = [f"{'ok' if x.available else 'MISSING':>7}  {x.name:<11} {x.detail}" for x in self]
        return "\n".join(lines + [f"   note  {note}" for note in self.notes])

    def __iter__(self) -> Iterator[Layer]:
        return iter(self.layers.values())

    def lacking(self, names: Iterable[str], why: str) -> Probe:
        """This probe with the layers ``names`` missing for ``why``, if available here."""
        layers = dict(self.layers)
        for name in names:
            if layers[name].available:
                layers[name] = Layer(name, False, f"{why} ({layers[name].detail})")
        return Probe(layers, self.landlock_abi, self.notes)


def describe_missing(missing: Sequence[Layer]) -> str:
    names = ", ".join(layer.name for layer in missing)
    return f"policy processes run without isolation layers: {names} (see evopolicy-mcp doctor)"


# -- detection ---------------------------------------------------------------

_probed: Probe | None = None


def probe() -> Probe:
    """Detect the layers by applying them in a throwaway child process. Cached."""
    global _probed
    if _probed is None:
        _probed = _describe(_try_in_child() | cgroups.probe())
    return _probed


def _describe(tried: dict[str, tuple[bool, str]]) -> Probe:
    ok, text = tried.get("landlock", (False, "not tried"))
    abi = int(text) if ok else 0
    landlock = f"Landlock ABI {abi}" if ok else text
    fs_detail = f"{landlock}: reads limited to the runtime and the program, writes to scratch"
    scope = "Landlock scopes: no signal or abstract socket beyond the episode"
    layers = {
        "filesystem": Layer("filesystem", ok, fs_detail if ok else landlock),
        "signals": Layer("signals", abi >= 6, scope if abi >= 6 else f"needs ABI 6; {landlock}"),
    }
    ok, text = tried.get("network", (False, "not tried"))
    if ok:
        text += ", no interface up, shared by the template's policy processes"
        text += "; TCP bind and connect denied by Landlock too" if abi >= 4 else ""
    else:
        text += "; run as root, or allow unprivileged user namespaces (sysctl "
        text += "kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0)"
    layers["network"] = Layer("network", ok, text)
    ok, text = tried.get("disk", (False, "not tried"))
    quota = ProcessLimits()
    if ok:
        text = (
            f"each episode's scratch directory is a tmpfs of its own, at most "
            f"{quota.disk_bytes >> 20} MiB and {quota.disk_files} files ({text})"
        )
    else:
        text += (
            "; mounting needs root or unprivileged user namespaces: without it only each "
            f"file's size is bounded ({quota.file_bytes >> 20} MiB), not a policy's disk use"
        )
    layers["disk"] = Layer("disk", ok, text)
    for name in ("privileges", "syscalls"):
        layers[name] = Layer(name, *tried.get(name, (False, "not tried")))
    ok, text = tried.get("memory", (False, "not tried"))
    mib = cgroups.memory_limit(quota) >> 20
    if ok:
        text = (
            f"each episode's processes share a memory cgroup of their address-space limit "
            f"plus the scratch quota ({mib} MiB by default), swap, memfds, tmpfs and pipes "
            f"included ({text})"
        )
    else:
        text += (
            "; only each process's address space is bounded, not memfd, tmpfs or pipe "
            "contents: run as root where cgroup v1 memory or a delegated v2 subtree is writable"
        )
    layers["memory"] = Layer("memory", ok, text)
    ok, text = tried.get("pids", (False, "not tried"))
    if ok:
        text = (
            f"each episode at most {quota.processes} processes, each server at most "
            f"{cgroups.DEFAULT_MAX_PROCESSES} ({text})"
        )
    else:
        text += "; RLIMIT_NPROC does not bind root: a fork bomb is not bounded while it runs"
    layers["processes"] = Layer("processes", ok, text)
    notes = []
    if os.geteuid() == 0:
        closed = _closed_to_others(sys.base_prefix)
        why = f", which could not run the Python runtime ({closed} is closed to others)"
        why = why if closed else ""
        notes.append(
            "policy processes run as uid 0, the server's: they are not moved to an "
            f"unprivileged uid{why}; root-owned files are theirs wherever a layer is "
            "missing; prefer running the server as an ordinary user"
        )
    return Probe({name: layers[name] for name in LAYERS}, abi, notes)


def _closed_to_others(path: str) -> str | None:
    """The first directory on the way to ``path`` that other users cannot enter, if any."""
    here = "/"
    for part in os.path.realpath(path).strip("/").split("/"):
        here = os.path.join(here, part)
        try:
            if not os.stat(here).st_mode & stat.S_IXOTH:
                return here
        except OSError:
            return None
    return None


def _try_in_child() -> dict[str, tuple[bool, str]]:
    """Apply each layer in a forked child that runs nothing but system calls, in the
    template's order: privileges go after the mounts."""
    return linux.try_in_child(
        (
            ("network", linux.enter_empty_namespaces),
            ("disk", _try_disk),
            ("privileges", _try_privileges),
            ("landlock", _try_landlock),
            ("syscalls", _try_syscalls),
        )
    )


def _try_disk() -> str:
    how = linux.enter_private_mounts()
    path = tempfile.mkdtemp(prefix="evopolicy-probe-")
    try:
        linux.mount_tmpfs(path, 64 << 10, 8)
        try:
            fd = os.open(os.path.join(path, "fill"), os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                for _ in range(4):
                    os.write(fd, bytes(64 << 10))
            finally:
                os.close(fd)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
        else:
            raise OSError(errno.EIO, "a tmpfs took more than its size")
        finally:
            linux.unmount(path)
    finally:
        os.rmdir(path)
    return how


def _try_privileges() -> str:
    linux.set_no_new_privs()
    linux.drop_capabilities()
    return "all capabilities dropped; no_new_privs"


def _try_landlock() -> str:
    try:
        abi = linux.landlock_abi()
    except OSError as exc:
        if exc.errno == errno.EOPNOTSUPP:
            raise OSError(exc.errno, "Landlock is built in but off: add landlock to lsm=") from None
        if exc.errno == errno.ENOSYS:
            raise OSError(exc.errno, "no Landlock: needs Linux >= 5.13") from None
        raise
    handled = linux.FS_BY_ABI.get(abi, linux.FS_ALL), linux.NET_TCP if abi >= 4 else 0, 0
    linux.restrict_self(linux.create_ruleset(linux.ruleset_attr(*handled)))
    return str(abi)


def _try_syscalls() -> str:
    program = linux.seccomp_filter()
    if program is None:
        raise OSError(errno.ENOSYS, f"no seccomp filter for {os.uname().machine}")
    linux.install_filter(program)
    try:
        socket.socket().close()
    except PermissionError:
        pass
    else:
        raise OSError(errno.EIO, "the seccomp filter let socket() through")
    return (
        "seccomp filter: no sockets, metadata changes, IPC objects, tracing, namespaces, "
        "sessions, file watches or leases, page-cache probes, or limits and scheduling of "
        "other processes"
    )


# -- application -------------------------------------------------------------


def runtime_paths(hidden: Iterable[str] = ()) -> list[str]:
    """The Python runtime's directories, minus any that holds a hidden path.

    The runtime is ``sys.base_prefix``, ``sys.prefix``, ``sys.exec_prefix`` and
    every existing ``sys.path`` entry. Never granted: a directory that contains
    a hidden path, this package's source checkout (its tasks, maybe records),
    ``$HOME`` itself, ``/`` or the temporary directory.
    """
    prefixes = [sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix]
    prefixes = [os.path.realpath(p) for p in prefixes]
    package_parent = os.path.realpath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
    never = {os.path.realpath(p) for p in hidden}
    if not any(_beneath(package_parent, p) for p in prefixes):
        never.add(package_parent)  # a source checkout, not an installed package
    never |= {os.path.realpath(os.path.expanduser("~")), os.path.realpath("/tmp"), "/"}
    chosen: list[str] = []
    for path in dict.fromkeys([*prefixes, *(os.path.realpath(p) for p in sys.path if p)]):
        if os.path.exists(path) and not any(_beneath(n, path) for n in never):
            chosen.append(path)
    return [p for p in chosen if not any(q != p and _beneath(p, q) for q in chosen)]


def _beneath(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


class Sandbox:
    """Made once in the template by :func:`prepare`; confines forked children."""

    def __init__(
        self, isolation: Isolation, found: Probe, runtime: list[str] | None = None
    ) -> None:
        self.isolation = isolation
        self.runtime = runtime
        self.probe = found
        self.missing = found.missing(isolation)
        use = {x.name for x in found if x.available and x.name in isolation.requested()}
        abi = found.landlock_abi
        self.fs = linux.FS_BY_ABI.get(abi, linux.FS_ALL) if "filesystem" in use else 0
        self.network = "network" in use
        self.disk = "disk" in use
        self.privileges = "privileges" in use
        self.cgroups = {CGROUP_LAYERS[name] for name in CGROUP_LAYERS if name in use}
        self.filter = linux.seccomp_filter() if "syscalls" in use else None
        net = linux.NET_TCP if abi >= 4 and self.network else 0
        scoped = linux.SCOPES if "signals" in use else 0
        self.landlock = bool(self.fs or net or scoped)
        self._attr = linux.ruleset_attr(self.fs, net, scoped)
        self._rules: list[Any] = []  # path rules on O_PATH descriptors kept open
        self._begun = False  # the rest is per process: set in the forked child by begin()
        self._ruleset = -1
        self._failure: OSError | None = None

    def open_rules(self) -> None:
        """Open the paths every episode may use and keep their rules ready."""
        granted = self.runtime
        if granted is None:
            granted = policy_runtime(runtime_paths(self.isolation.hidden)).grants
        paths = dict.fromkeys(granted, RUNTIME)
        seen: set[tuple[int, int]] = set()
        for path, access in (paths | DEVICES).items():
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # optional, or absent on this distribution
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) in seen:  # /lib -> /usr/lib and the like
                os.close(fd)
                continue
            seen.add((st.st_dev, st.st_ino))
            access &= self.fs & (~0 if stat.S_ISDIR(st.st_mode) else linux.FILE_RIGHTS)
            self._rules.append(linux.path_rule(access, fd))

    def begin(self) -> None:
        """In a forked child only: every step that does not depend on the episode.

        Sets no_new_privs, builds the Landlock ruleset from the shared rules,
        drops the capabilities and installs the seccomp filter. A process
        forked before its episode is known calls this while it waits, which
        takes most of the work off the episode's start; :meth:`enter` calls it
        otherwise. A failure is kept for :meth:`enter` to raise.
        """
        if self._begun:
            return
        self._begun = True
        try:
            linux.set_no_new_privs()
            if self.landlock:
                self._ruleset = self._build()
            if self.privileges:
                linux.drop_capabilities()
            if self.filter is not None:
                linux.install_filter(self.filter, os.getpid())
        except OSError as exc:
            self._failure = exc

    def enter(self, program_dir: str, scratch_dir: str) -> None:
        """Confine the calling process for good, before any program code. Raises OSError."""
        self.begin()
        if self._failure is not None:
            raise self._failure
        if self.landlock:
            ruleset, self._ruleset = self._ruleset, -1
            try:
                if self.fs:
                    self._grant(ruleset, program_dir, READ_ONLY)
                    self._grant(ruleset, scratch_dir, SCRATCH)
                linux.restrict_self(ruleset)
            finally:
                os.close(ruleset)

    def _build(self) -> int:
        ruleset = linux.create_ruleset(self._attr)
        try:
            for rule in self._rules:
                linux.add_rule(ruleset, rule)
            if self.fs:
                self._grant(ruleset, "/proc/self", READ_ONLY)
        except OSError:
            os.close(ruleset)
            raise
        return ruleset

    def _grant(self, ruleset: int, path: str, access: int) -> None:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY)
        try:
            linux.add_rule(ruleset, linux.path_rule(access & self.fs, fd), path)
        finally:
            os.close(fd)


def prepare(
    isolation: Isolation, found: Probe | None = None, runtime: list[str] | None = None
) -> Sandbox:
    """Make the template ready to confine its children; once, before the first fork.

    ``runtime``: the runtime files and directories to grant, if worked out already
    (by :func:`~evopolicy_mcp.kernel.runtime.policy_runtime`, from ``isolation.hidden``).

    Raises :class:`SandboxError` in strict mode when a requested layer is
    missing, naming it and why. The template enters the empty network
    namespace here, so it must not need the network afterwards.
    """
    sandbox = Sandbox(isolation, found or probe(), runtime)
    if sandbox.missing and isolation.strict:
        reasons = "; ".join(f"{layer.name}: {layer.detail}" for layer in sandbox.missing)
        raise SandboxError(f"strict isolation, but layers are missing: {reasons}")
    if sandbox.network:
        linux.enter_empty_namespaces()
    if sandbox.disk:  # after the network: without root, inside the same user namespace
        linux.enter_private_mounts()
        # Reading a runtime file must not change its access time, which any later
        # episode could stat: state one episode leaves and another reads.
        linux.freeze_access_times()
    if sandbox.fs:
        sandbox.open_rules()
    return sandbox
