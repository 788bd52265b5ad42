"""The resource limits of one policy process, and setting them on the calling process.

A leaf of the kernel: the sandbox, the cgroups and the confinement steps all
size themselves from :class:`ProcessLimits`.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

__all__ = ["SIGNALS_PENDING", "ProcessLimits", "apply_limits"]


@dataclass(frozen=True)
class ProcessLimits:
    """Resource limits of one policy process. Wall-clock deadlines stay in the host."""

    memory_bytes: int = 2 << 30
    cpu_seconds: int = 60
    open_files: int = 64
    file_bytes: int = 64 << 20
    # The scratch directory's quota, its copy of the program included: a tmpfs of its own
    # (the sandbox's ``disk`` layer; without it only ``file_bytes`` bounds each file).
    disk_bytes: int = 256 << 20
    disk_files: int = 4096
    # Where cgroups are writable (the sandbox's ``memory`` and ``processes`` layers): the
    # episode's memory cgroup holds ``memory_bytes + disk_bytes`` (memfds, scratch and pipe
    # contents included, all its processes together), and its pids cgroup this many processes.
    processes: int = 64


SIGNALS_PENDING = 64  # signals queued to a policy process at most


def apply_limits(limits: ProcessLimits) -> None:
    def lower(which: int, value: int) -> None:
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))

    lower(resource.RLIMIT_AS, limits.memory_bytes)
    # Soft CPU limit sends SIGXCPU; the hard limit one second later kills outright.
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    cpu_hard = limits.cpu_seconds + 1
    if hard != resource.RLIM_INFINITY:
        cpu_hard = min(cpu_hard, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (min(limits.cpu_seconds, cpu_hard), cpu_hard))
    lower(resource.RLIMIT_NOFILE, limits.open_files)
    lower(resource.RLIMIT_FSIZE, limits.file_bytes)
    lower(resource.RLIMIT_CORE, 0)
    # Queued signals count against the uid, every process of the server's user included.
    lower(resource.RLIMIT_SIGPENDING, SIGNALS_PENDING)
