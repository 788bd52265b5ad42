"""The agent CLI's sandbox, applied by the process that then becomes the CLI.

    python -m evopolicy_mcp.agents.jail --spec-fd N -- ARGV...
    python -m evopolicy_mcp.agents.jail --probe

The launcher (:mod:`.confine`) decides what the agent may reach and writes it
as a :class:`JailSpec` to a pipe; this module only applies it, layer by layer,
and fails (exit code :data:`EXIT_JAIL`, one line on stderr) rather than start
the CLI with less than it was asked for. Layers:

- ``pids``: a PID namespace whose first process is a small init (this module):
  the agent sees and can name only its own processes, and they all end when the
  CLI does, whatever they do to escape (``setsid``, double forks).
- ``mounts``: a mount namespace whose root holds only what the agent is
  granted, each at its own path (read-only where it may only read), with a
  private ``/tmp`` and ``/dev/shm``: the records, other runs' workspaces, the
  tasks directories, the rest of the home directory and every Unix socket of
  the machine do not exist there.
- ``filesystem`` (Landlock): reads and executes only beneath ``read``, writes
  only beneath ``write``; a process outside the sandbox cannot be traced and
  its ``/proc/PID/environ``, ``maps`` and ``mem`` cannot be read.
- ``signals`` (Landlock ABI 6 scopes): no signal to, and no abstract Unix
  socket of, any process outside the sandbox.
- ``privileges``: no capabilities (as root: uid 0 without any privilege), and
  ``no_new_privs``: no set-uid program brings any back.

Without root the namespaces are made inside a new user namespace that maps
the caller's own uid, as the policy sandbox does. Imports: the standard
library and :mod:`evopolicy_mcp.kernel.linux` only, and few of those (no
dataclasses, no argparse): the jail runs as ``python -S`` and starts in ~20 ms.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import stat
import sys
from collections.abc import Callable, Sequence

from evopolicy_mcp.kernel import linux

__all__ = ["BOOT", "EXIT_JAIL", "LAYERS", "JailSpec", "main"]

LAYERS = ("filesystem", "signals", "privileges", "mounts", "pids")
EXIT_JAIL = 125  # the sandbox could not be applied: the CLI never ran
TMP_BYTES = 2 << 30  # the private /tmp and /dev/shm, each
TMP_INODES = 1 << 20
ROOT_BYTES = 1 << 20  # the new root: directories, mount points and symlinks only

READ = linux.READ_FILE | linux.READ_DIR
RUNTIME = READ | linux.EXECUTE
PR_SET_PDEATHSIG = 1


# How the launcher starts this module: without site (no site-packages scan, no .pth
# hooks), the package's parent put first on sys.path (argument 1).
BOOT = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from evopolicy_mcp.agents.jail import main; sys.exit(main(sys.argv[1:]))"
)
FIELDS = ("layers", "read", "write", "proc", "links", "private")


class JailSpec:
    """What the CLI may reach. Paths are absolute and exist; the launcher checks.

    ``read``: read and execute beneath; ``write``: everything beneath (files: read,
    write, execute); ``proc``: read only (/proc). For the ``mounts`` layer:
    ``links``, the symlinks on the way to those paths (path, target), and
    ``private``, a fresh tmpfs each."""

    def __init__(
        self,
        layers: Sequence[str],
        read: Sequence[str] = (),
        write: Sequence[str] = (),
        proc: Sequence[str] = (),
        links: Sequence[Sequence[str]] = (),
        private: Sequence[str] = ("/tmp", "/dev/shm"),
    ) -> None:
        self.layers, self.read, self.write = tuple(layers), tuple(read), tuple(write)
        self.proc, self.private = tuple(proc), tuple(private)
        self.links = tuple((str(a), str(b)) for a, b in links)

    def to_json(self) -> str:
        return json.dumps({name: getattr(self, name) for name in FIELDS})

    @classmethod
    def from_json(cls, text: str) -> JailSpec:
        data = json.loads(text)
        if not isinstance(data, dict) or set(data) - set(FIELDS):
            raise ValueError("a JSON object of " + ", ".join(FIELDS))
        return cls(**data)


class JailError(Exception):
    """A layer could not be applied."""


def _beneath(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


# ---------------------------------------------------------------- mounts


def _mount_point(path: str, directory: bool) -> None:
    if directory:
        os.makedirs(path, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))


def _binds(spec: JailSpec) -> list[tuple[str, bool]]:
    """What to bind into the new root, outer first, with whether it is writable; a path
    beneath one already bound with at least its rights is left out."""
    wanted = {p: False for p in (*spec.read, *spec.proc)}
    wanted.update({p: True for p in spec.write if p not in spec.private})
    binds: list[tuple[str, bool]] = []
    for path in sorted(wanted, key=lambda p: (p.count("/"), p)):
        writable = wanted[path]
        if any(_beneath(path, q) and (w or not writable) for q, w in binds):
            continue
        binds.append((path, writable))
    return binds


def _new_root(spec: JailSpec, fresh_proc: bool) -> None:
    """Make the caller's root a tmpfs that holds only what ``spec`` grants, each at its
    own path: read-only binds of what it may read, writable ones of what it may
    write, the symlinks on the way to them, a private /tmp and /dev/shm, and /proc
    (fresh in a new PID namespace). Nothing else exists there: not the records, not
    the home directory's other entries, not the Unix sockets of /run or /tmp."""
    binds = [(p, w) for p, w in _binds(spec) if not (fresh_proc and p == "/proc")]
    handles: dict[str, int] = {}
    for path, _ in binds:  # before anything is mounted over them
        with contextlib.suppress(FileNotFoundError):
            handles[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
    root = "/tmp"  # any directory will do: the mount namespace is ours alone
    try:
        linux.mount_tmpfs(root, ROOT_BYTES, 4096, mode=0o755, executables=True)
        for path in spec.private:  # first: what is granted beneath them goes inside
            os.makedirs(root + path, exist_ok=True)
            linux.mount_tmpfs(root + path, TMP_BYTES, TMP_INODES, mode=0o1777, executables=True)
        for path, writable in binds:
            if path not in handles:
                continue
            target = root + path
            _mount_point(target, stat.S_ISDIR(os.fstat(handles[path]).st_mode))
            linux.bind_mount(handles[path], target, read_only=not writable)
    finally:
        for fd in handles.values():
            os.close(fd)
    for link, target in spec.links:
        if not os.path.lexists(root + link):
            os.makedirs(os.path.dirname(root + link), exist_ok=True)
            os.symlink(target, root + link)
    if fresh_proc:
        os.makedirs(root + "/proc", exist_ok=True)
        linux.mount_proc(root + "/proc")
    os.makedirs(root + "/.old")
    os.chdir(root)
    linux.pivot_root(".", ".old")
    os.chdir("/")
    linux.unmount("/.old")
    os.rmdir("/.old")
    linux.remount_read_only("/")


# ---------------------------------------------------------------- Landlock


def _landlock(spec: JailSpec, signals: bool) -> None:
    abi = linux.landlock_abi()
    handled = linux.FS_BY_ABI.get(abi, linux.FS_ALL)
    scoped = linux.SCOPES if signals else 0
    ruleset = linux.create_ruleset(linux.ruleset_attr(handled, 0, scoped))
    try:
        for paths, access in ((spec.read, RUNTIME), (spec.write, handled), (spec.proc, READ)):
            for path in paths:
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except FileNotFoundError:
                    continue  # gone since the launcher looked
                try:
                    is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
                    rights = access & handled & (~0 if is_dir else linux.FILE_RIGHTS)
                    linux.add_rule(ruleset, linux.path_rule(rights, fd), f"Landlock rule {path}")
                finally:
                    os.close(fd)
        linux.restrict_self(ruleset)
    finally:
        os.close(ruleset)


# ---------------------------------------------------------------- init


def _init(argv: Sequence[str]) -> int:
    """PID 1 of the agent's namespace: start the CLI, reap orphans, end with the CLI.

    Signals from outside reach PID 1 only when it handles them, and it does not:
    the launcher signals the CLI's whole session, the CLI included. When this
    process ends, the kernel kills everything left in the namespace."""
    child = os.fork()
    if child == 0:
        _exec(argv)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)  # unhandled: ignored by PID 1
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return 0
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code  # a signal N as 128 + N, as shells do


def _exec(argv: Sequence[str]) -> None:
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(s, signal.SIG_DFL)
    try:
        os.execvp(argv[0], list(argv))
    except OSError as exc:
        print(f"cannot run {argv[0]}: {exc.strerror}", file=sys.stderr, flush=True)
        os._exit(127)


def _prctl(option: int, arg: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


# ---------------------------------------------------------------- entry


def _confine(spec: JailSpec) -> bool:
    """Apply every layer of ``spec`` to this process; True if it is now PID 1 of a new
    namespace (the caller then runs :func:`_init`). The process that stays outside
    waits for that one and never returns."""
    layers = set(spec.layers)
    unknown = layers - set(LAYERS)
    if unknown:
        raise JailError(f"unknown layers {sorted(unknown)}")
    init = False
    if layers & {"mounts", "pids"}:
        flags = linux.CLONE_NEWNS | (linux.CLONE_NEWPID if "pids" in layers else 0)
        linux.unshare_namespaces(flags)
        linux.make_mounts_private()
        if "pids" in layers:
            _split()
            init = True
        if "mounts" in layers:
            cwd = os.getcwd()
            _new_root(spec, fresh_proc="pids" in layers)
            os.chdir(cwd)  # the same path, in the new root
        elif "pids" in layers:
            linux.mount_proc()
    linux.set_no_new_privs()
    if "filesystem" in layers:
        _landlock(spec, "signals" in layers)
    elif "signals" in layers:
        raise JailError("the signals layer needs the filesystem layer (Landlock)")
    if "privileges" in layers:
        linux.drop_capabilities()
    return init


def _split() -> None:
    """Fork into the new PID namespace. The parent stays outside, waits for the child
    and exits with its status; the child (PID 1 there) returns. The launcher's stop
    signals pass the parent by: the CLI gets them itself, and SIGKILL of the parent
    takes the namespace with it (the child's parent-death signal)."""
    child = os.fork()
    if child == 0:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == 1:  # the parent is already gone
            os._exit(EXIT_JAIL)
        return
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    if 128 < code <= 128 + 64:  # the CLI died of a signal: so does this process
        with contextlib.suppress(ValueError, OSError):  # SIGKILL has no handler to reset
            signal.signal(code - 128, signal.SIG_DFL)
        os.kill(os.getpid(), code - 128)
    os._exit(code % 256)


def run(spec: JailSpec, argv: Sequence[str]) -> int:
    try:
        init = _confine(spec)
    except (OSError, JailError) as exc:
        print(f"evopolicy-mcp jail: cannot confine the agent: {exc}", file=sys.stderr, flush=True)
        return EXIT_JAIL
    if init:
        return _init(argv)
    _exec(argv)
    return 127  # not reached


# ---------------------------------------------------------------- probing


def _in_child(attempt: Callable[[], str]) -> tuple[bool, str]:
    """Run ``attempt`` in a throwaway child of its own."""
    return linux.try_in_child((("it", attempt),)).get("it", (False, "the probe died"))


def _try_mounts() -> str:
    import tempfile

    user = linux.unshare_namespaces(linux.CLONE_NEWNS)
    linux.make_mounts_private()
    linux.mount_tmpfs(tempfile.gettempdir(), 64 << 10, 8, mode=0o1777)
    return "in a new user namespace" if user else "as root"


def _try_pids() -> str:
    user = linux.unshare_namespaces(linux.CLONE_NEWNS | linux.CLONE_NEWPID)
    linux.make_mounts_private()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - PID 1 of the new namespace
        try:
            linux.mount_proc()
            os._exit(0 if os.getpid() == 1 else 1)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise OSError("cannot mount /proc in a new PID namespace")
    return "in a new user namespace" if user else "as root"


def _try_landlock() -> str:
    abi = linux.landlock_abi()
    linux.set_no_new_privs()
    handled = linux.FS_BY_ABI.get(abi, linux.FS_ALL)
    linux.restrict_self(linux.create_ruleset(linux.ruleset_attr(handled, 0, 0)))
    return str(abi)


def _try_privileges() -> str:
    linux.set_no_new_privs()
    linux.drop_capabilities()
    return f"uid {os.geteuid()}" + (
        ", which keeps owning root's files" if os.geteuid() == 0 else ""
    )


def probe() -> dict[str, tuple[bool, str]]:
    """Which layers this machine can apply: layer -> (works, detail or why not)."""
    found = {
        "mounts": _in_child(_try_mounts),
        "pids": _in_child(_try_pids),
        "privileges": _in_child(_try_privileges),
    }
    ok, text = _in_child(_try_landlock)
    found["filesystem"] = (ok, f"Landlock ABI {text}" if ok else text)
    abi = int(text) if ok else 0
    found["signals"] = (abi >= 6, f"Landlock ABI {abi}" if ok else text)
    return found


USAGE = "usage: python -m evopolicy_mcp.agents.jail (--probe | --spec-fd N -- COMMAND...)"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--probe"]:
        print(json.dumps(probe()))
        return 0
    if len(args) < 4 or args[0] != "--spec-fd" or args[2] != "--" or not args[1].isdigit():
        print(USAGE, file=sys.stderr)
        return 2
    with os.fdopen(int(args[1]), "r") as pipe:
        text = pipe.read()
    try:
        spec = JailSpec.from_json(text)
    except (ValueError, TypeError) as exc:
        print(f"evopolicy-mcp jail: bad spec: {exc}", file=sys.stderr)
        return EXIT_JAIL
    return run(spec, args[3:])


if __name__ == "__main__":
    sys.exit(main())
