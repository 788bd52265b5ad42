"""Host instances of one data directory: each live host holds a lock file of its own.

``instances/<id>.lock`` is held (``flock``) by the host whose id it names for as
long as that process lives; the kernel lets go of it when the process dies,
however it dies. A lock that can be taken belongs to a dead host, and its
work in progress may be taken over. A leaf, like :mod:`evopolicy_mcp.store.database`,
which uses it.
"""

from __future__ import annotations

import fcntl
import os
import secrets
from pathlib import Path
from typing import IO

__all__ = ["Instances"]


class Instances:
    """This process's host instance in ``data_dir``, and whether others are alive.

    Not thread-safe on its own: the store calls it under its lock."""

    def __init__(self, data_dir: Path) -> None:
        self.directory = data_dir / "instances"
        self.id: str | None = None  # this host's, once acquired
        self._file: IO[str] | None = None

    def acquire(self) -> str:
        """Register this process's host; held until :meth:`release` or process death."""
        if self.id is not None:
            return self.id
        self.directory.mkdir(exist_ok=True)
        instance = f"{os.getpid()}-{secrets.token_hex(6)}"
        fh = open(self.directory / f"{instance}.lock", "w")  # noqa: SIM115 - held open on purpose
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._file = fh
        self.id = instance
        return instance

    def alive(self, instance: str | None) -> bool:
        """Whether the host ``instance`` still holds its lock (a dead one's file goes)."""
        if instance is None:
            return False
        if instance == self.id:
            return True
        path = self.directory / f"{instance}.lock"
        try:
            fh = open(path)  # noqa: SIM115
        except FileNotFoundError:
            return False
        with fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            path.unlink(missing_ok=True)
            return False

    def release(self) -> None:
        if self._file is not None:
            lock_path = Path(self._file.name)
            self._file.close()
            lock_path.unlink(missing_ok=True)
            self._file = None
