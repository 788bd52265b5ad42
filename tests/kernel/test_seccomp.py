"""The seccomp filter of :mod:`evopolicy_mcp.kernel.linux`, system call by system call.

Each test makes its calls in a forked child, which keeps whatever they change
about itself: one installs the filter and checks what it refuses and lets
through; one checks, without the filter, that each number in the filter's
tables is the call it names. Policy-level attacks are in ``test_sandbox.py``.
"""

from __future__ import annotations

import ctypes
import errno
import json
import mmap
import os
import resource
from collections.abc import Callable

import pytest

from evopolicy_mcp.kernel import linux
from tests.support.kernel import needs

# fcntl and setpgid by machine, written out here: the tests check linux.py's numbers
FCNTL_SETPGID = {"x86_64": (72, 109), "aarch64": (25, 154)}.get(os.uname().machine, (-1, -1))
MADVISE_PREADV2 = {"x86_64": (28, 327), "aarch64": (233, 286)}.get(os.uname().machine, (-1, -1))


def in_child(run: Callable[[], dict[str, object]]) -> dict[str, object]:
    """What ``run`` returns, run in a forked child (whose changes to itself stay there)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(w, json.dumps(run()).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as pipe:
        found = json.loads(pipe.read() or "{}")
    os.waitpid(pid, 0)
    return found


@needs("syscalls")
def test_the_seccomp_filter_refuses_its_calls_and_lets_the_others_through() -> None:
    # Every call gets invalid arguments: one the filter let through would fail otherwise.
    clone, clone3, getppid = {"x86_64": (56, 435, 110), "aarch64": (220, 435, 173)}[
        os.uname().machine
    ]

    def calls() -> dict[str, object]:  # in a child: system calls and their errno
        libc = ctypes.CDLL(None, use_errno=True)
        bad = [ctypes.c_long(-1)] * 6

        def errno_of(nr: int, *args: object) -> int:
            ctypes.set_errno(0)
            libc.syscall(ctypes.c_long(nr), *args)
            return ctypes.get_errno()

        filt = linux.seccomp_filter()
        assert filt is not None
        linux.set_no_new_privs()
        linux.install_filter(filt, os.getpid())
        found = {name: errno_of(nr, *bad) for name, nr in linux.denied_calls().items()}
        found["clone3"] = errno_of(clone3, None, ctypes.c_long(0))
        # CLONE_NEWUSER with CLONE_FS is EINVAL to the kernel: no process is ever made.
        found["clone, new user namespace"] = errno_of(clone, ctypes.c_long(0x10000200), *bad[:4])
        found["getppid"] = errno_of(getppid)
        # On another process (the parent) each is refused; on the caller (0) it reaches
        # the kernel, which rejects the invalid arguments that come with it. No call
        # here would change the parent, were the filter to let it through.
        parent = os.getppid()
        nice = os.getpriority(os.PRIO_PROCESS, parent)
        own = linux.self_only_calls()
        for name, nr in own.items():
            if name == "setpriority":
                other = errno_of(nr, 0, parent, nice)
                mine = errno_of(nr, 0, 0, 19)  # this child's own: allowed, returns 0
                # which = 3 is no PRIO_* at all (EINVAL), so that it changes nothing
                found["setpriority, not a process"] = errno_of(nr, 3, 0, 19)
            else:
                other, mine = errno_of(nr, parent, *bad[:5]), errno_of(nr, 0, *bad[:5])
            found[f"{name}, the parent"], found[f"{name}, itself"] = other, mine
            if name != "setpriority":
                found[f"{name}, itself by its pid"] = errno_of(nr, os.getpid(), *bad[:5])
        found["setpriority, itself by its pid"] = errno_of(own["setpriority"], 0, os.getpid(), 19)
        fcntl_nr, setpgid_nr = FCNTL_SETPGID
        found["fcntl, a lease"] = errno_of(fcntl_nr, -1, 1024, 1)  # F_SETLEASE
        found["fcntl, a pipe's size"] = errno_of(fcntl_nr, -1, 1031, 1 << 20)  # F_SETPIPE_SZ
        found["fcntl, flags"] = errno_of(fcntl_nr, -1, 1)  # F_GETFD: EBADF
        found["setpgid, another group"] = errno_of(setpgid_nr, -1, 1)
        found["setpgid, its own group"] = errno_of(setpgid_nr, -1, 0)  # ESRCH
        found["setpgid, its own group by its pid"] = errno_of(setpgid_nr, -1, os.getpid())
        found["fcntl, a delegation"] = errno_of(fcntl_nr, -1, 1040, 1)  # F_SETDELEG
        found["read"] = errno_of(0 if clone == 56 else 63, *bad[:3])
        madvise_nr, preadv2_nr = MADVISE_PREADV2
        for advice, name in ((20, "cold"), (21, "page out"), (4, "don't need")):
            found[f"madvise, {name}"] = errno_of(madvise_nr, ctypes.c_long(1), 4096, advice)
        found["preadv2, no wait"] = errno_of(preadv2_nr, -1, None, 0, 0, 0, 0x8)
        found["preadv2"] = errno_of(preadv2_nr, -1, None, 0, 0, 0, 0)
        return found

    found = in_child(calls)
    refused = {name for name, err in found.items() if err == errno.EPERM}
    others = {f"{name}, the parent" for name in linux.self_only_calls()}
    assert refused == {
        *linux.denied_calls(),
        "clone, new user namespace",
        "setpriority, not a process",
        "fcntl, a lease",
        "fcntl, a pipe's size",
        "setpgid, another group",
        "fcntl, a delegation",
        "madvise, cold",
        "madvise, page out",
        "preadv2, no wait",
        *others,
    }
    # An unaligned address is EINVAL, a bad descriptor EBADF: let through to the kernel.
    assert (found["madvise, don't need"], found["preadv2"]) == (errno.EINVAL, errno.EBADF)
    assert found["setpriority, itself"] == found["setpriority, itself by its pid"] == 0
    assert found["clone3"] == errno.ENOSYS
    assert (found["getppid"], found["read"]) == (0, errno.EBADF)


def test_the_filter_numbers_are_the_calls_they_name() -> None:
    # The filter's tables are checked against the kernel, not against themselves: each call
    # is made unfiltered, in a child, where its effect tells which call ran.
    denied, own = linux.denied_calls(), linux.self_only_calls()
    if not denied:
        pytest.skip(f"no seccomp filter for {os.uname().machine}")
    fcntl_nr, setpgid_nr = FCNTL_SETPGID

    def effects() -> dict[str, object]:  # in a child: what each call did
        libc = ctypes.CDLL(None, use_errno=True)

        def call(nr: int, *args: object) -> int:
            return int(libc.syscall(ctypes.c_long(nr), *args))

        def kind(fd: int) -> str:
            return os.readlink(f"/proc/self/fd/{fd}")

        found: dict[str, object] = {}
        found["setsid"] = call(denied["setsid"]) == os.getpid()
        watches = call(denied["inotify_init1"], 0)
        found["inotify_init1"] = kind(watches)
        found["inotify_add_watch"] = call(denied["inotify_add_watch"], watches, b"/", 1)
        if os.uname().machine == "x86_64":  # aarch64 has inotify_init1 only
            found["inotify_init"] = kind(call(denied["inotify_init"]))
        marks = call(denied["fanotify_init"], 0, 0)
        found["fanotify_init"] = kind(marks)
        found["fanotify_mark"] = call(denied["fanotify_mark"], marks, 1, 1, -100, b"/")
        old = (ctypes.c_uint64 * 2)()
        call(own["prlimit64"], 0, resource.RLIMIT_NOFILE, None, old)
        found["prlimit64"] = list(old) == list(resource.getrlimit(resource.RLIMIT_NOFILE))
        cpu = min(os.sched_getaffinity(0))
        mask = ctypes.c_uint64(1 << cpu)
        call(own["sched_setaffinity"], 0, 8, ctypes.byref(mask))
        found["sched_setaffinity"] = os.sched_getaffinity(0) == {cpu}
        call(own["setpriority"], 0, 0, 7)
        found["setpriority"] = os.getpriority(os.PRIO_PROCESS, 0)
        prio = ctypes.c_int(0)
        call(own["sched_setscheduler"], 0, os.SCHED_BATCH, ctypes.byref(prio))
        found["sched_setscheduler"] = os.sched_getscheduler(0) == os.SCHED_BATCH
        attr = (ctypes.c_uint32 * 12)(48, os.SCHED_IDLE)  # size, policy; the rest 0
        call(own["sched_setattr"], 0, attr, 0)
        found["sched_setattr"] = os.sched_getscheduler(0) == os.SCHED_IDLE
        closing = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        inherited = os.dup2(closing, 100, inheritable=True)  # F_GETFD: FD_CLOEXEC or not
        found["fcntl"] = (call(fcntl_nr, closing, 1), call(fcntl_nr, inherited, 1)) == (1, 0)
        call(setpgid_nr, 0, 0)
        found["setpgid"] = os.getpgid(0) == os.getpid()
        madvise_nr, preadv2_nr = MADVISE_PREADV2
        page = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        page[:4] = b"data"
        address = ctypes.addressof(ctypes.c_char.from_buffer(page))
        vec = ctypes.c_ubyte(0)
        call(denied["mincore"], ctypes.c_void_p(address), 4096, ctypes.byref(vec))
        found["mincore"] = vec.value & 1
        call(madvise_nr, ctypes.c_void_p(address), 4096, 4)  # MADV_DONTNEED: zero again
        found["madvise"] = page[:4].hex()
        r, w = os.pipe()
        os.write(w, b"piped")
        buf = ctypes.create_string_buffer(5)
        iov = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 5)
        found["preadv2"] = call(preadv2_nr, r, iov, 1, -1, -1, 0) == 5 and buf.raw == b"piped"
        return found

    found = in_child(effects)
    expected = {
        "setsid": True,
        "inotify_init1": "anon_inode:inotify",
        "inotify_add_watch": 1,
        "fanotify_init": "anon_inode:[fanotify]",
        "fanotify_mark": 0,
        "prlimit64": True,
        "sched_setaffinity": True,
        "setpriority": 7,
        "sched_setscheduler": True,
        "sched_setattr": True,
        "fcntl": True,
        "setpgid": True,
        "mincore": 1,
        "madvise": "00000000",
        "preadv2": True,
    }
    if os.uname().machine == "x86_64":
        expected["inotify_init"] = "anon_inode:inotify"
    assert found == expected
