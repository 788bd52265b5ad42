"""Policy processes' scratch directories: made, given a program's copy, and removed.

The template (:mod:`evopolicy_mcp.kernel.zygote`) gives each spare a scratch
directory when it forks it (:class:`Scratch`). With the sandbox's ``disk``
layer that is a tmpfs of the quota in
:class:`~evopolicy_mcp.kernel.limits.ProcessLimits`, mounted in the template's
private mount namespace, remounted at hand-over should the episode ask for
another quota, and unmounted once its episode is reaped and swept (by the
template's :class:`Tidier` process: an unmount waits for the kernel): an
episode that fills it fills nothing else, and nothing of it is left. The
template never reads a program's bytes itself: they move inside the kernel
(:func:`copy_program`).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from typing import Generic, TypeVar

from evopolicy_mcp.kernel import linux
from evopolicy_mcp.kernel.confine import PR_SET_PDEATHSIG, prctl
from evopolicy_mcp.kernel.limits import ProcessLimits

__all__ = [
    "MAX_PENDING",
    "TIDIER_NAME",
    "Scratch",
    "Tidier",
    "copy_program",
    "remove_scratch",
    "warm_copy",
]

TIDIER_NAME = "evopolicy-tidy"
ROOT_INODES = 1 << 16  # directories under the scratch root at once (spares, ended episodes)
MAX_PENDING = 8  # ended episodes' scratch the tidier may have to do (each up to its quota)
T = TypeVar("T")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def copy_program(source: int, target: str) -> None:
    """Copy the program folder open on ``source`` (a directory descriptor, left open)
    to ``target``: contents only, no modes or times (the sandbox already forbids
    changing them), nothing followed through a symlink.

    The bytes move inside the kernel (sendfile, which unlike copy_file_range
    crosses filesystems: the target is on the scratch tmpfs): a program's
    content never passes through this process's memory, nor does its path,
    which later forks inherit."""
    os.makedirs(target, exist_ok=True)
    with os.scandir(source) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            sub = os.open(entry.name, _DIR_FLAGS, dir_fd=source)
            try:
                copy_program(sub, os.path.join(target, entry.name))
            finally:
                os.close(sub)
        elif entry.is_file(follow_symlinks=False):
            src = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=source)
            try:
                dst = os.open(
                    os.path.join(target, entry.name),
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                    0o600,
                )
                try:
                    while os.sendfile(dst, src, None, 1 << 30):
                        pass
                finally:
                    os.close(dst)
            finally:
                os.close(src)


def remove_scratch(path: str, mounted: bool) -> None:
    if mounted:
        try:
            linux.unmount(path)  # frees the whole tmpfs at once
        except OSError:
            pass
    shutil.rmtree(path, ignore_errors=True)


def warm_copy() -> None:
    """Run copy_program once here, so its code paths are warm in every fork."""
    with tempfile.TemporaryDirectory(prefix="evopolicy-warm-") as tmp:
        source = os.path.join(tmp, "a")
        os.mkdir(source)
        with open(os.path.join(source, "policy.py"), "w") as f:
            f.write("pass\n")
        fd = os.open(source, _DIR_FLAGS)
        try:
            copy_program(fd, os.path.join(tmp, "b"))
        finally:
            os.close(fd)


class Scratch:
    """The scratch directories under one root: each a tmpfs of its own quota, or, given
    no limits (no disk layer), a plain directory."""

    def __init__(self, root: str, limits: ProcessLimits | None) -> None:
        self.root = root
        self.mounted = limits is not None
        if self.mounted:
            # The directories the episodes' mounts sit on are made and removed in memory:
            # on the machine's ext4 /tmp a mkdir took ~110 us and an rmdir ~95 us (journal),
            # on a tmpfs 5 us each. Only directories: a byte quota of one page will do.
            linux.mount_tmpfs(root, 4096, ROOT_INODES)
        # The quota new directories get (the last one an episode asked for), and each
        # directory's own: spares forked earlier keep the quota they were made with.
        self.quota = (limits.disk_bytes, limits.disk_files) if limits is not None else None
        self.quota_of: dict[str, tuple[int, int]] = {}

    def make(self, name: str) -> str:
        path = os.path.join(self.root, name)
        os.mkdir(path, 0o700)
        if self.quota is not None:
            try:
                linux.mount_tmpfs(path, *self.quota)
            except OSError:
                os.rmdir(path)
                raise
            self.quota_of[path] = self.quota
        return path

    def fit(self, path: str, limits: ProcessLimits) -> None:
        """Give ``path`` the episode's quota if it differs from the one it has."""
        want = (limits.disk_bytes, limits.disk_files)
        have = self.quota_of.get(path)
        if have is not None and want != have:
            linux.mount_tmpfs(path, *want, remount=True)
            self.quota_of[path] = self.quota = want  # the next directories' as well

    def release(self, path: str | None) -> str | None:
        """Forget ``path``, which someone else (the tidier) removes; returns it."""
        if path is not None:
            self.quota_of.pop(path, None)
        return path

    def remove(self, path: str) -> None:
        self.quota_of.pop(path, None)
        remove_scratch(path, self.mounted)


class Tidier(Generic[T]):
    """A process of the template's own that unmounts and removes ended episodes' scratch.
    Each scratch comes with an item of the template's (the episode's cgroups), given
    back once the scratch is gone.

    Unmounting a tmpfs waits for an RCU grace period, 0.5-5 ms here: in the template's
    loop it held up the next spawn. A thread would share the template's GIL, and one
    that the scheduler preempted while holding it stalled the template for
    milliseconds. It is forked before any spare and runs no program. The template
    never waits for it: it removes a scratch itself when the tidier is gone, or has
    ``MAX_PENDING`` to do already, or cannot take more.
    """

    def __init__(self, mounted: bool) -> None:
        self.mounted = mounted  # scratch directories are tmpfs mounts
        self.pending: dict[str, T | None] = {}  # scratch -> what came with it
        self.ready: list[T] = []  # what came with scratch that is gone
        todo_r, self.todo_w = os.pipe2(os.O_CLOEXEC)
        self.done_r, done_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
                with open("/proc/self/comm", "w") as comm:
                    comm.write(TIDIER_NAME)  # what ps and the tests know it by
                low, high = sorted((todo_r, done_w))  # nothing else of the template's
                os.closerange(3, low)
                os.closerange(low + 1, high)
                os.closerange(high + 1, os.sysconf("SC_OPEN_MAX"))
                self._serve(todo_r, done_w)
                code = 0
            finally:
                os._exit(code)
        self.pid: int | None = pid  # None once it is reaped
        self.working = True  # False once it can take no more
        os.close(todo_r)
        os.close(done_w)
        os.set_blocking(self.todo_w, False)
        os.set_blocking(self.done_r, False)
        self._partial = b""

    def put(self, scratch: str | None, item: T | None) -> None:
        if scratch is not None and self.working and len(self.pending) < MAX_PENDING:
            try:
                os.write(self.todo_w, os.fsencode(scratch) + b"\n")  # short: whole or not at all
                self.pending[scratch] = item
                return
            except BlockingIOError:
                pass  # it is behind: this one the template does
            except OSError:
                self.lost()
        if scratch is not None:
            remove_scratch(scratch, self.mounted)
        if item is not None:
            self.ready.append(item)

    def busy(self) -> bool:
        return bool(self.pending or self.ready)

    def drain(self) -> None:
        """Take the tidier's answers: what came with the scratch it removed becomes ready."""
        while self.pending:
            try:
                data = os.read(self.done_r, 1 << 16)
            except BlockingIOError:
                return
            if not data:
                self.lost()
                return
            *lines, self._partial = (self._partial + data).split(b"\n")
            for line in lines:
                item = self.pending.pop(os.fsdecode(line), None)
                if item is not None:
                    self.ready.append(item)

    def finished(self) -> list[T]:
        """What came with each scratch that has gone since the last call."""
        self.drain()
        ready, self.ready = self.ready, []
        return ready

    def lost(self) -> None:
        """It died or was told to stop: what it had not done, the template does now."""
        self.working = False
        for scratch in list(self.pending):
            self.put(scratch, self.pending.pop(scratch))

    def reaped(self, pid: int) -> None:
        """The template reaped ``pid``: if that was the tidier, its pid may be anyone's now."""
        if pid == self.pid:
            self.pid = None
            self.lost()

    def close(self, timeout: float = 10.0) -> None:
        """Let it finish what it was given, then stop it; at most ``timeout`` seconds."""
        if self.todo_w >= 0:
            os.close(self.todo_w)  # it exits at the end of its input
            self.todo_w = -1
        deadline = time.monotonic() + timeout
        while self.pid is not None:
            self.drain()  # its answers must not fill the pipe it writes them to
            try:
                done, _status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                done = self.pid
            if done == self.pid:
                self.pid = None
                break
            if time.monotonic() >= deadline:
                os.kill(self.pid, signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.001)
        self.drain()
        self.lost()

    def _serve(self, todo_r: int, done_w: int) -> None:
        with open(todo_r, "rb") as todo:
            for line in todo:
                path = os.fsdecode(line.rstrip(b"\n"))
                remove_scratch(path, self.mounted)
                os.write(done_w, line)
