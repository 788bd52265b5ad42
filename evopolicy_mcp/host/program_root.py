"""Where a ``program_dir`` may come from, opened without races or probing.

The operator names a program root (``serve --program-root DIR``; ``agent run``
names the workspace). The host opens it once. A ``program_dir`` is a path
inside it, relative to it or absolute under it; anything else is refused from
its text alone, before the file system is touched, so an error can never tell
what exists elsewhere. Inside the root each component is opened relative to
the one before with ``O_DIRECTORY | O_NOFOLLOW``: no symlink on the way is
followed, and the folder is then checked and copied through that one file
descriptor (:func:`evopolicy_mcp.evaluation.snapshot.capture`), so a path
swapped for a symlink between the check and the copy redirects nothing.

The server's records (run secrets, hidden results) are never copied: every
directory from the program folder up to ``/``, and every directory the copy
walks into, is compared with the records by device and inode.

Without a root (a :class:`~evopolicy_mcp.host.authority.Host` used as a
library: its caller is the operator) a path is opened as given, relative to
the working directory, with the last component not followed; the records
check is the same.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from evopolicy_mcp.host.errors import HostError

__all__ = ["ProgramRoot"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_DEPTH = 4096  # bounds the walk up to /


def _invalid(message: str) -> HostError:
    return HostError("program_invalid", message)


def _identity(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


class ProgramRoot:
    """The folder ``program_dir`` must lie in (``None``: anywhere), and the records it
    must never reach. Thread-safe: it holds one read-only directory fd."""

    def __init__(self, root: Path | None, records_dir: Path) -> None:
        records = os.stat(records_dir)
        self.records = frozenset({_identity(records)})
        self.path: Path | None = None
        self._fd: int | None = None
        if root is not None:
            given = Path(root).expanduser().absolute()
            self.path = given.resolve()
            self._names = {os.path.normpath(given), str(self.path)}
            try:
                self._fd = os.open(self.path, _DIR_FLAGS)
            except OSError as exc:
                raise ValueError(f"program root {given}: {exc.strerror}") from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def open(self, program_dir: str) -> int:
        """A directory fd of ``program_dir`` (the caller closes it), or ``program_invalid``."""
        if not isinstance(program_dir, str) or not program_dir.strip():
            raise _invalid("program_dir is empty; give the folder of policy.py")
        if "\0" in program_dir:
            raise _invalid("program_dir holds a NUL character; give the folder of policy.py")
        shown = program_dir if len(program_dir) <= 200 else program_dir[:200] + "..."
        fd = self._open_beneath(program_dir, shown) if self._fd is not None else None
        if fd is None:
            fd = self._open_anywhere(program_dir, shown)
        try:
            self._check_ancestors(fd)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open_anywhere(self, program_dir: str, shown: str) -> int:
        try:
            return os.open(os.path.expanduser(program_dir), _DIR_FLAGS)
        except OSError as exc:
            raise self._open_error(exc, shown, None, os.path.expanduser(program_dir)) from None

    def _open_beneath(self, program_dir: str, shown: str) -> int:
        assert self._fd is not None and self.path is not None
        text = os.path.normpath(os.path.expanduser(program_dir))
        if os.path.isabs(text):
            inside = next(
                (text[len(n) :] for n in self._names if text == n or text.startswith(n + "/")),
                None,
            )
        else:
            inside = None if text == ".." or text.startswith("../") else text
        if inside is None:
            raise _invalid(
                f"program_dir {shown!r} is outside this server's program folder {self.path}; "
                "keep your program in a folder inside it"
            )
        parts = [p for p in inside.split("/") if p and p != "."]
        fd = os.dup(self._fd)
        try:
            for part in parts:
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise self._open_error(exc, shown, fd, part) from None
                os.close(fd)
                fd = child
                if _identity(os.fstat(fd)) in self.records:
                    raise _overlap()
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open_error(self, exc: OSError, shown: str, dir_fd: int | None, name: str) -> HostError:
        if exc.errno == errno.ENOENT:
            return _invalid(
                f"program_dir {shown!r} does not exist; give the folder holding policy.py"
            )
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
            except OSError:
                mode = 0
            if stat.S_ISLNK(mode) or exc.errno == errno.ELOOP:
                return _invalid(
                    f"program_dir {shown!r} goes through a symlink; give the real folder"
                )
            return _invalid(
                f"program_dir {shown!r} is not a folder; give the folder holding policy.py"
            )
        return _invalid(f"cannot open program_dir {shown!r}: {exc.strerror}")

    def _check_ancestors(self, fd: int) -> None:
        """Refuse a folder that is the records or lies inside them, by fd up to /."""
        current = os.dup(fd)
        try:
            for _ in range(_MAX_DEPTH):
                here = _identity(os.fstat(current))
                if here in self.records:
                    raise _overlap()
                parent = os.open("..", _DIR_FLAGS, dir_fd=current)
                os.close(current)
                current = parent
                if _identity(os.fstat(current)) == here:
                    return
        finally:
            os.close(current)


def _overlap() -> HostError:
    return _invalid(
        "program_dir overlaps the server's records; keep your program in a working "
        "directory of your own"
    )
