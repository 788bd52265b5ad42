"""A process-count limit for the template and every policy process it forks.

``RLIMIT_NPROC`` does not bind root, so the bound is a cgroup's ``pids.max``
(cgroup v1's ``pids`` hierarchy, or v2 where the ``pids`` controller is
enabled for the root group). The runner moves the template into a fresh
group right after starting it; every process forked below it is counted, so a
fork bomb in a policy hits the limit (``fork`` fails with EAGAIN) instead of
the machine's pid space. Groups left behind by a killed host are removed at
the next start.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DEFAULT_MAX_PROCESSES", "ProcessGroup", "pids_root"]

DEFAULT_MAX_PROCESSES = 512
_PREFIX = "evopolicy-"


def pids_root() -> Path | None:
    """Where pids groups can be made here, or None (no writable pids controller)."""
    v1 = Path("/sys/fs/cgroup/pids")
    if (v1 / "cgroup.procs").exists() and os.access(v1, os.W_OK):
        return v1
    v2 = Path("/sys/fs/cgroup")
    try:
        enabled = (v2 / "cgroup.subtree_control").read_text().split()
    except OSError:
        return None
    return v2 if "pids" in enabled and os.access(v2, os.W_OK) else None


class ProcessGroup:
    """A pids group holding one template and its descendants."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, pid: int, limit: int = DEFAULT_MAX_PROCESSES) -> ProcessGroup | None:
        """Move ``pid`` into a new group of at most ``limit`` processes; None if impossible."""
        root = pids_root()
        if root is None:
            return None
        _remove_stale(root)
        path = root / f"{_PREFIX}{os.getpid()}-{pid}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(limit))
            (path / "cgroup.procs").write_text(str(pid))
        except OSError:
            _remove(path)
            return None
        return cls(path)

    def current(self) -> int:
        try:
            return int((self.path / "pids.current").read_text())
        except (OSError, ValueError):
            return 0

    def remove(self) -> None:
        """Remove the group once its processes are gone (a no-op while any remains)."""
        _remove(self.path)


def _remove(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


def _remove_stale(root: Path) -> None:
    """Empty groups of hosts that died without removing theirs."""
    for group in root.glob(f"{_PREFIX}*"):
        try:
            empty = not (group / "cgroup.procs").read_text().strip()
        except OSError:
            continue
        if empty:
            _remove(group)
