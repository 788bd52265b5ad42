"""Confinement applied inside a freshly forked policy process, before any program code runs.

Everything here must be cheap (it runs once per episode after ``fork``) and
must only narrow what the process can do. The order matters: the process
first leaves the template's process group, arranges to die with its parent, moves
its frame pipes to fixed descriptors and closes every other one, then lowers
its resource limits.

The sandbox (:mod:`evopolicy_mcp.kernel.sandbox`) goes on before the descriptors are
shuffled: it builds its Landlock rules from descriptors the template opened,
which the sweep of inherited descriptors closes right after. No program code
runs in between.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import signal
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from evopolicy_mcp.kernel.limits import ProcessLimits, apply_limits

if TYPE_CHECKING:
    from evopolicy_mcp.kernel.sandbox import Sandbox

__all__ = [
    "EXIT_SPARE_FAILED",
    "EXIT_UNCONFINED",
    "FD_ACTIONS",
    "FD_REPORT",
    "FD_OBSERVATIONS",
    "enter_episode",
    "pin",
    "prctl",
]

# Fixed descriptors inside a policy process: observations in, actions out.
FD_OBSERVATIONS = 3
FD_ACTIONS = 4
FD_REPORT = 5  # the spare's socket to the template, until it reports its confinement
# Exit status of a policy process whose sandbox could not be applied: a host fault.
EXIT_UNCONFINED = 71
EXIT_SPARE_FAILED = (
    70  # a spare process failed before its episode (see evopolicy_mcp.kernel.zygote)
)

PR_SET_PDEATHSIG = 1
PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38

_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, arg: int = 0) -> int:
    result = int(_libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}) failed: {os.strerror(err)}")
    return result


def pin(cpus: Iterable[int], pid: int = 0) -> None:
    """Keep process ``pid`` (0: the caller) on ``cpus``."""
    try:
        os.sched_setaffinity(pid, cpus)
    except OSError:
        pass  # a restricted cpuset, or gone; staying where it is is only slower


def enter_episode(
    observations_fd: int,
    actions_fd: int,
    output_fd: int,
    *,
    scratch_dir: str,
    limits: ProcessLimits,
    program_dir: str = "",
    sandbox: Sandbox | None = None,
    report_fd: int | None = None,
) -> None:
    """Turn a just-forked child of the template into a confined policy process.

    ``report_fd``, the spare's socket to the template, stays open on
    :data:`FD_REPORT` for the caller to say "confined" on and close.

    If the sandbox cannot be applied the process exits with ``EXIT_UNCONFINED``
    before any program code runs, saying why on the template's stderr.
    """
    # A process group of its own: the template kills the whole group at the end. Not a
    # session (the template has one without a terminal already): setsid() makes a new
    # scheduler autogroup, 1.4 ms of a policy process's start here.
    os.setpgid(0, 0)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    prctl(PR_SET_NO_NEW_PRIVS, 1)  # Landlock and seccomp require it; no exec can gain privileges
    if sandbox is not None:
        try:
            sandbox.enter(program_dir, scratch_dir)
        except OSError as exc:
            os.write(2, f"evopolicy-mcp: cannot confine a policy process: {exc}\n".encode())
            os._exit(EXIT_UNCONFINED)
    # Frame pipes onto fixed numbers, stdout and stderr into the captured output pipe.
    # Lift the received descriptors above the fixed numbers first so no dup2 clobbers another.
    observations_fd, actions_fd, output_fd = (
        fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (observations_fd, actions_fd, output_fd)
    )
    if report_fd is not None:
        report_fd = fcntl.fcntl(report_fd, fcntl.F_DUPFD, 10)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.dup2(observations_fd, FD_OBSERVATIONS)
    os.dup2(actions_fd, FD_ACTIONS)
    last = FD_ACTIONS
    if report_fd is not None:  # kept until the report is made, right before the program runs
        os.dup2(report_fd, FD_REPORT, inheritable=False)
        last = FD_REPORT
    os.closerange(last + 1, 1 << 16)  # nothing else of the template's survives
    # Print goes straight to the captured pipe: a policy killed at the end of its episode
    # loses no buffered output.
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(  # noqa: SIM115
        2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False
    )
    os.chdir(scratch_dir)
    tempfile: Any = sys.modules.get("tempfile")
    if tempfile is not None:  # the template's cached choice (/tmp) is out of reach
        tempfile.tempdir = scratch_dir
    apply_limits(limits)
