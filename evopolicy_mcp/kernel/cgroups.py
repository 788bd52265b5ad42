"""Control groups of policy processes: a process cap per server and per episode, and a
memory limit per episode.

``RLIMIT_NPROC`` does not bind root, and ``RLIMIT_AS`` bounds what a process
maps, not what the kernel holds for it (memfd contents, its scratch tmpfs,
pipe buffers): cgroups bound both. Groups are made in every writable
hierarchy that has the controller (cgroup v1 ``pids`` and ``memory``, or v2
where the root delegates ``pids``/``memory`` in ``cgroup.subtree_control``),
at its root, one tree per runner::

    <root>/evopolicy-<host pid>-<template pid>/   pids.max: the runner's cap (all its processes)
        template/                                 the template itself (pids hierarchies only)
        <n>/                                      spare or episode n: its process cap and
                                                  memory limit (see :func:`memory_limit`)

The template makes its tree before it forks anything, and gives each spare a
group when it forks it (off the critical path); the spare moves itself in
right after the fork, before it gets its program. After the episode is
reaped and swept the template reads whether the memory limit OOM-killed
anything there (:meth:`EpisodeGroup.oom_killed`). Then the group, emptied,
goes to a later spare if it holds next to no memory
(:meth:`EpisodeGroup.reuse`), or is removed. The runner removes the tree
once the template is gone; trees of hosts that died outright are removed at
the next start.

A policy cannot leave its group only because ``/sys/fs/cgroup`` is out of its
reach (the sandbox's ``filesystem`` layer): it runs as the server's uid, and
without Landlock a uid 0 policy could write its pid elsewhere.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from evopolicy_mcp.kernel.limits import ProcessLimits

__all__ = [
    "DEFAULT_MAX_PROCESSES",
    "MAX_FREE_GROUPS",
    "REUSE_MAX_BYTES",
    "EpisodeGroup",
    "GroupPool",
    "Groups",
    "Hierarchy",
    "hierarchies",
    "memory_limit",
    "probe",
    "remove_runner",
    "runner_processes",
]

DEFAULT_MAX_PROCESSES = 512
CGROUP = Path("/sys/fs/cgroup")
CONTROLLERS = ("pids", "memory")
_PREFIX = "evopolicy-"


REUSE_MAX_BYTES = 4 << 20  # memory an emptied group may still hold and be reused
MAX_FREE_GROUPS = 8  # emptied episode groups kept for the next spares


def memory_limit(limits: ProcessLimits) -> int:
    """An episode's memory cgroup limit: its address-space limit plus its scratch quota.

    Everything the episode holds counts: its processes' memory (forked children
    share the one limit), its scratch tmpfs, memfds, pipe buffers.
    """
    return limits.memory_bytes + limits.disk_bytes


@dataclass(frozen=True)
class Hierarchy:
    """A mounted cgroup hierarchy where this process can make groups."""

    root: Path
    controllers: frozenset[str]
    v2: bool


def hierarchies() -> list[Hierarchy]:
    """The writable hierarchies holding the pids and memory controllers, or none."""
    found = []
    for name in CONTROLLERS:
        v1 = CGROUP / name
        if (v1 / "cgroup.procs").exists() and os.access(v1, os.W_OK):
            found.append(Hierarchy(v1, frozenset({name}), False))
    try:
        enabled = set((CGROUP / "cgroup.subtree_control").read_text().split())
    except OSError:
        enabled = set()
    rest = frozenset(enabled & set(CONTROLLERS)) - {c for h in found for c in h.controllers}
    if rest and os.access(CGROUP, os.W_OK):
        found.append(Hierarchy(CGROUP, rest, True))
    return found


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read(path: Path | str) -> bytes:
    """A control file's content: raw reads take half the time of ``read_text``."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _set_memory(group: Path, v2: bool, limit: int) -> None:
    """The memory limit, swap included (v1 ``memsw`` must stay >= the memory limit)."""
    if v2:
        _write(group / "memory.max", str(limit))
        if (group / "memory.swap.max").exists():
            _write(group / "memory.swap.max", "0")
        _write(group / "memory.oom.group", "1")  # an OOM kill takes the whole episode
        return
    names = ["memory.limit_in_bytes"]
    if (group / "memory.memsw.limit_in_bytes").exists():
        names.append("memory.memsw.limit_in_bytes")
    try:  # lowering: memory first
        for name in names:
            _write(group / name, str(limit))
    except OSError:  # raising: swap first
        for name in reversed(names):
            _write(group / name, str(limit))


def _remove(path: Path) -> bool:
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _remove_tree(base: Path) -> bool:
    """Remove a runner's tree once no process is left in it; False while any remains."""
    try:
        children = [p for p in base.iterdir() if p.is_dir()]
    except OSError:
        children = []
    done = all([_remove(child) for child in children])
    return _remove(base) and done


def _runner_name(host_pid: int, template_pid: int) -> str:
    return f"{_PREFIX}{host_pid}-{template_pid}"


def _remove_stale(root: Path) -> None:
    """Trees of hosts that died without removing theirs."""
    for base in root.glob(f"{_PREFIX}*"):
        try:
            host = int(base.name[len(_PREFIX) :].split("-")[0])
            os.kill(host, 0)
        except (ValueError, PermissionError):
            continue
        except ProcessLookupError:
            _remove_tree(base)
            continue
        # the host is alive (or its pid was reused): its tree is left alone


class EpisodeGroup:
    """The group(s) of one spare and then its episode: one directory per hierarchy."""

    def __init__(self, paths: list[tuple[Hierarchy, Path]]) -> None:
        self.paths = paths
        self.limits: tuple[int, int] | None = None
        self.oom_before = 0  # OOM kills counted here before its current episode

    def reuse(self) -> bool:
        """Ready an ended episode's group for the next spare: True if no process is left
        in it and it holds at most ``REUSE_MAX_BYTES`` of memory.

        Making and removing a group costs the template ~0.7 ms per episode; a
        reused one costs three reads. What an episode charged and left behind
        (page cache of files it read) stays charged to the group, so a group
        that holds more is removed rather than passed on. Its OOM count carries
        on: the next episode's kills are counted from here."""
        if self.processes() != []:
            return False
        charged = self.charged()
        if charged is None or charged > REUSE_MAX_BYTES:
            return False
        self.oom_before = self.oom_kills()
        return True

    def charged(self) -> int | None:
        """Bytes charged to the group's memory controller (0 without one; None unread)."""
        memory = self._memory()
        if memory is None:
            return 0
        h, path = memory
        try:
            return int(_read(path / ("memory.current" if h.v2 else "memory.usage_in_bytes")))
        except (OSError, ValueError):
            return None

    def _memory(self) -> tuple[Hierarchy, Path] | None:
        """The group's directory in the hierarchy with the memory controller, if any."""
        return next(((h, path) for h, path in self.paths if "memory" in h.controllers), None)

    def oom_killed(self) -> bool:
        """Whether the memory limit killed a process of the current episode."""
        return self.oom_kills() > self.oom_before

    def fit(self, limits: ProcessLimits) -> None:
        """Set the episode's process cap and memory limit, unless already set. OSError."""
        want = (limits.processes, memory_limit(limits))
        if want == self.limits:
            return
        for h, path in self.paths:
            if "pids" in h.controllers:
                _write(path / "pids.max", str(limits.processes))
            if "memory" in h.controllers:
                _set_memory(path, h.v2, want[1])
        self.limits = want

    def join(self, pid: int) -> None:
        for _h, path in self.paths:
            _write(path / "cgroup.procs", str(pid))

    def processes(self) -> list[int] | None:
        """The pids in the group now, or None if it cannot be read."""
        for _h, path in self.paths:
            try:
                return [int(p) for p in _read(path / "cgroup.procs").split()]
            except OSError:
                continue
        return None

    def oom_kills(self) -> int:
        """How many processes the memory limit killed here so far."""
        memory = self._memory()
        if memory is None:
            return 0
        h, path = memory
        try:
            text = _read(path / ("memory.events" if h.v2 else "memory.oom_control")).decode()
        except OSError:
            return 0
        fields = dict(line.split() for line in text.splitlines() if line.count(" ") == 1)
        return int(fields.get("oom_kill", 0))

    def remove(self) -> bool:
        """Remove the group once its processes are gone; False while any remains."""
        return all([_remove(path) for _h, path in self.paths])


class Groups:
    """One runner's tree, in the template that made it."""

    def __init__(self, bases: list[tuple[Hierarchy, Path]], controllers: set[str]) -> None:
        self.bases = bases
        self.controllers = controllers  # what episode groups get: the sandbox's layers in use

    @classmethod
    def enter(cls, host_pid: int, max_processes: int) -> Groups:
        """In the template, before it forks anything: make its tree and move in."""
        bases = []
        for h in hierarchies():
            _remove_stale(h.root)
            base = h.root / _runner_name(host_pid, os.getpid())
            try:
                base.mkdir()
                if h.v2:  # no process may stay in base itself: template/ holds the template
                    _write(
                        base / "cgroup.subtree_control", " ".join(f"+{c}" for c in h.controllers)
                    )
                if "pids" in h.controllers:
                    _write(base / "pids.max", str(max_processes))
                    (base / "template").mkdir()
                    _write(base / "template" / "cgroup.procs", str(os.getpid()))
            except OSError:
                _remove_tree(base)
                continue
            bases.append((h, base))
        return cls(bases, set())

    def available(self) -> set[str]:
        return {c for h, _base in self.bases for c in h.controllers}

    def episode(self, name: str, limits: ProcessLimits) -> EpisodeGroup | None:
        """A new group with ``limits`` for a spare, or None if no controller is in use. OSError."""
        paths = [
            (Hierarchy(h.root, h.controllers & self.controllers, h.v2), base / name)
            for h, base in self.bases
            if h.controllers & self.controllers
        ]
        if not paths:
            return None
        group = EpisodeGroup([])
        try:
            for h, path in paths:
                path.mkdir()
                group.paths.append((h, path))
            group.fit(limits)
        except OSError:
            group.remove()
            raise
        return group


class GroupPool:
    """The episode groups of one template: given to spares (made, or an emptied one
    reused), and once their episode is over kept for a later spare or removed."""

    def __init__(self, groups: Groups) -> None:
        self.groups = groups
        self.limits = ProcessLimits()  # what new spares' groups get: the last episode's
        self.free: list[EpisodeGroup] = []  # emptied, for the next spares
        self.retired: list[EpisodeGroup] = []  # removed once nothing is left in them

    def take(self, name: str) -> EpisodeGroup | None:
        """A group with the current limits for a new spare: a free one, else a new one
        (None if no controller is in use). OSError."""
        self.remove_retired()
        while self.free:
            group = self.free.pop()
            try:
                group.fit(self.limits)
                return group
            except OSError:
                self.retired.append(group)
        return self.groups.episode(name, self.limits)

    def fit(self, group: EpisodeGroup, limits: ProcessLimits) -> None:
        """Give a spare's group its episode's limits (no-op if it has them). OSError."""
        group.fit(limits)
        self.limits = limits  # the next spares' as well

    def give_back(self, group: EpisodeGroup) -> None:
        """An ended episode's group, its scratch gone: kept if it can be reused."""
        if len(self.free) < MAX_FREE_GROUPS and group.reuse():
            self.free.append(group)
        else:
            self.retired.append(group)

    def retire(self, group: EpisodeGroup) -> None:
        self.retired.append(group)

    def remove_retired(self) -> None:
        """Remove retired groups (rmdir); one still in use stays retired."""
        self.retired = [group for group in self.retired if not group.remove()]

    def close(self) -> None:
        self.retired += self.free
        self.free = []
        self.remove_retired()


def kill_runner(host_pid: int, template_pid: int) -> None:
    """SIGKILL every process left in a runner's tree once its template is gone.

    A template killed outright (SIGKILL, the OOM killer) takes its episode
    leaders with it (their parent-death signal), but not what they forked: those
    are reparented outside the tree of processes, yet stay in its groups."""
    for h in hierarchies():
        base = h.root / _runner_name(host_pid, template_pid)
        if not base.is_dir():
            continue
        for _ in range(100):
            pids = set()
            for group, _subdirs, _files in os.walk(base):  # close() may remove it meanwhile
                try:
                    pids |= {int(p) for p in _read(os.path.join(group, "cgroup.procs")).split()}
                except (OSError, ValueError):
                    pass
            pids.discard(os.getpid())
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.01)


def remove_runner(host_pid: int, template_pid: int) -> bool:
    """Remove a runner's tree after its template exited; False while a process remains."""
    found = [h.root / _runner_name(host_pid, template_pid) for h in hierarchies()]
    return all([_remove_tree(base) for base in found if base.exists()])


def runner_processes(host_pid: int, template_pid: int) -> Path | None:
    """The runner's pids group (its cap covers the template and every policy), if any."""
    for h in hierarchies():
        base = h.root / _runner_name(host_pid, template_pid)
        if "pids" in h.controllers and base.is_dir():
            return base
    return None


def probe() -> dict[str, tuple[bool, str]]:
    """Whether episode groups can be made here: a throwaway group per controller."""
    found = {h_c: h for h in hierarchies() for h_c in h.controllers}
    results: dict[str, tuple[bool, str]] = {}
    for name in CONTROLLERS:
        h = found.get(name)
        if h is None:
            why = "not writable" if (CGROUP / name).exists() else "not mounted"
            results[name] = (
                False,
                f"no writable {name} cgroup (v1 {CGROUP / name}: {why}; "
                f"v2 {CGROUP}: {name} not delegated)",
            )
            continue
        trial = h.root / f"{_PREFIX}probe-{os.getpid()}"
        try:
            trial.mkdir(exist_ok=True)
            try:
                if name == "pids":
                    _write(trial / "pids.max", "8")
                else:
                    _set_memory(trial, h.v2, 64 << 20)
            finally:
                trial.rmdir()
        except OSError as exc:
            results[name] = (False, f"cannot make a {name} cgroup in {h.root}: {exc}")
            continue
        results[name] = (True, f"cgroup {'v2' if h.v2 else 'v1'} {h.root}")
    return results
