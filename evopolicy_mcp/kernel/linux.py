"""Linux interfaces of the sandbox via ctypes: Landlock, namespaces, mounts, capabilities, seccomp.

Only the mechanisms live here; what a policy process may reach is decided in
:mod:`evopolicy_mcp.kernel.sandbox`. Every function raises OSError with the
system's reason when the kernel refuses.

The seccomp filter covers what Landlock does not: Landlock checks opening,
creating and removing files, not changing their metadata nor connecting to
Unix sockets by path, so a policy running as root could otherwise
``chmod``/``chown`` any host file it can name, or reach a root daemon through
its socket in ``/run``. The filter answers EPERM to:

- ``socket()`` of any family (``socketpair`` stays: asyncio and
  multiprocessing use it), and io_uring, which can open sockets and files
  without those calls;
- changing metadata: the chmod, chown, utime and set/remove-xattr families;
- kernel objects that outlive the process and could carry data to the next
  episode: SysV IPC, POSIX message queues, keyrings;
- reaching into other processes: ptrace, process_vm_readv/writev, pidfd_getfd;
- new namespaces: unshare, setns, clone with a namespace flag (``clone3``
  answers ENOSYS, so the C library falls back to ``clone``, whose flags a
  filter can read);
- the page cache of files others read too (the runtime, the shared
  libraries): no reading which pages are cached (``mincore``, ``cachestat``,
  ``preadv2`` with ``RWF_NOWAIT``), and no dropping or prefetching them
  (``fadvise64``, ``readahead``, ``madvise`` with ``MADV_COLD`` or
  ``MADV_PAGEOUT``, ``process_madvise``). A page's residency was state that
  one episode could set or clear and a later one read.

Only x86_64 and aarch64 are known (system call numbers); elsewhere Landlock
reports ENOSYS and :func:`seccomp_filter` returns None.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "Filter",
    "add_rule",
    "bind_mount",
    "create_ruleset",
    "denied_calls",
    "drop_capabilities",
    "enter_empty_namespaces",
    "enter_private_mounts",
    "freeze_access_times",
    "install_filter",
    "landlock_abi",
    "make_mounts_private",
    "mount_proc",
    "mount_tmpfs",
    "path_rule",
    "pivot_root",
    "remount_read_only",
    "restrict_self",
    "seccomp_filter",
    "self_only_calls",
    "set_no_new_privs",
    "try_in_child",
    "unmount",
    "unshare_namespaces",
]

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def try_in_child(attempts: Sequence[tuple[str, Callable[[], str]]]) -> dict[str, tuple[bool, str]]:
    """Run ``attempts`` one after the other in a forked child (what they do to a process
    is for good): name -> (worked, what it returned or why it failed). Empty when the
    child died before it could say."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        os.close(r)
        results: dict[str, tuple[bool, str]] = {}
        for name, attempt in attempts:
            try:
                results[name] = (True, attempt())
            except BaseException as exc:
                results[name] = (False, str(exc))
        os.write(w, json.dumps(results).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    try:
        return {name: (bool(ok), str(text)) for name, (ok, text) in json.loads(data).items()}
    except ValueError:
        return {}


def set_no_new_privs() -> None:
    _check(_libc.prctl(38, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


# -- Landlock ------------------------------------------------------------------

_LANDLOCK_ARCHES = ("x86_64", "aarch64")  # the same numbers on both
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION, _PATH_BENEATH = 1, 1

# Filesystem rights (bits 0-12 since ABI 1); REFER from ABI 2, TRUNCATE from 3, IOCTL_DEV from 5.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR, REMOVE_DIR, REMOVE_FILE = 1, 2, 4, 8, 16, 32
MAKE_DIR, MAKE_REG, MAKE_FIFO, MAKE_SYM = 1 << 7, 1 << 8, 1 << 10, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}
FS_ALL = (1 << 16) - 1  # ABI 5 and later
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # all a non-directory takes
NET_TCP = 1 | 2  # BIND_TCP | CONNECT_TCP, ABI 4
SCOPES = 1 | 2  # ABSTRACT_UNIX_SOCKET | SIGNAL, ABI 6


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_ATTR_SIZE = ctypes.sizeof(_RulesetAttr)  # older kernels accept it: they see zeros past their end


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; OSError (ENOSYS, EOPNOTSUPP) without Landlock."""
    if os.uname().machine not in _LANDLOCK_ARCHES:
        raise OSError(errno.ENOSYS, f"Landlock system call numbers unknown on {os.uname().machine}")
    return _check(_libc.syscall(_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION), "Landlock")


def ruleset_attr(fs: int, net: int, scoped: int) -> Any:
    """What a ruleset handles (everything handled and not granted is denied), ready to pass."""
    return ctypes.byref(_RulesetAttr(fs, net, scoped))


def create_ruleset(attr: Any) -> int:
    return _check(_libc.syscall(_CREATE_RULESET, attr, _ATTR_SIZE, 0), "landlock_create_ruleset")


def path_rule(access: int, fd: int) -> Any:
    """A rule granting ``access`` beneath the O_PATH descriptor ``fd``, ready to pass."""
    return ctypes.byref(_PathBeneath(access, fd))


def add_rule(ruleset: int, rule: Any, what: str = "landlock_add_rule") -> None:
    _check(_libc.syscall(_ADD_RULE, ruleset, _PATH_BENEATH, rule, 0), what)


def restrict_self(ruleset: int) -> None:
    """Confine the calling thread and its future children; needs no_new_privs."""
    _check(_libc.syscall(_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")


# -- namespaces, mounts and capabilities ---------------------------------------

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 2, 4, 8, 32, 4096
MS_REC, MS_PRIVATE = 1 << 14, 1 << 18
MNT_DETACH = 2
# source, target, type, flags (an unsigned long), options
_libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


def unshare_namespaces(flags: int) -> bool:
    """Unshare ``flags`` in the calling single-threaded process; True if that took a new
    user namespace (one mapping the caller's own uid and gid), as it does without root."""
    if _libc.unshare(flags) == 0:
        return False
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER | flags), "unshare")
    maps = {"setgroups": "deny", "uid_map": f"{uid} {uid} 1", "gid_map": f"{gid} {gid} 1"}
    for name, text in maps.items():
        fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
    return True


def enter_empty_namespaces() -> str:
    """Move the calling single-threaded process into new network and IPC namespaces.

    As root they are created directly; otherwise inside a new user namespace
    that maps the caller's own uid and gid.
    """
    user = unshare_namespaces(CLONE_NEWNET | CLONE_NEWIPC)
    return f"new {'user, ' if user else ''}network and IPC namespace"


def enter_private_mounts() -> str:
    """Move the calling single-threaded process into a mount namespace of its own.

    Every mount in it is made private first, so nothing mounted afterwards
    propagates to the machine's mount table, and the namespace with all its
    mounts goes away when its last process ends.
    """
    user = unshare_namespaces(CLONE_NEWNS)
    make_mounts_private()
    return f"private {'user and ' if user else ''}mount namespace"


MS_RDONLY, MS_NOATIME = 1, 1024
_KEPT_FLAGS = {"ro": MS_RDONLY, "nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC}


def freeze_access_times() -> int:
    """In a private mount namespace: make every mount ``noatime`` (its other per-mount
    flags kept), so that reading a file there changes nothing another process can
    ``stat``. Only this namespace's view changes. Returns how many mounts took it;
    a mount the kernel keeps locked (inside a user namespace) stays as it was."""
    with open("/proc/self/mountinfo", "rb") as f:
        lines = f.read().splitlines()
    done = 0
    for line in lines:
        fields = line.split()
        # The mount point, with its space, tab, newline and backslash octal-escaped.
        target = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), fields[4])
        flags = MS_REMOUNT | MS_BIND | MS_NOATIME
        for option in fields[5].split(b","):
            flags |= _KEPT_FLAGS.get(option.decode(), 0)
        if _libc.mount(None, target, None, flags, None) == 0:
            done += 1
    return done


def make_mounts_private() -> None:
    """Stop mount events propagating between this mount namespace and the machine's."""
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount(MS_PRIVATE)")


def mount_tmpfs(
    path: str,
    size: int,
    inodes: int,
    *,
    remount: bool = False,
    mode: int = 0o700,
    executables: bool = False,
) -> None:
    """A tmpfs of at most ``size`` bytes and ``inodes`` files and directories on ``path``
    (no set-uid or devices; no executables unless asked); ``remount`` changes the two limits."""
    flags = MS_NOSUID | MS_NODEV | (0 if executables else MS_NOEXEC)
    flags |= MS_REMOUNT if remount else 0
    options = f"size={size},nr_inodes={inodes}" + ("" if remount else f",mode={mode:o}")
    where = os.fsencode(path)
    _check(_libc.mount(b"tmpfs", where, b"tmpfs", flags, options.encode()), f"mount {path}")


def bind_mount(fd: int, target: str, *, read_only: bool = False) -> None:
    """Show the directory or file open as ``fd`` (O_PATH will do) at ``target`` as well,
    with the mounts beneath it; ``read_only`` makes the top one read-only."""
    source = f"/proc/self/fd/{fd}".encode()
    where = os.fsencode(target)
    _check(_libc.mount(source, where, None, MS_BIND | MS_REC, None), f"bind {target}")
    if read_only:
        remount_read_only(target)


MS_NODIRATIME, MS_RELATIME = 2048, 1 << 21
_STATVFS_FLAGS = (  # a mount's flags as statvfs reports them -> as mount takes them
    (os.ST_NOSUID, MS_NOSUID),
    (os.ST_NODEV, MS_NODEV),
    (os.ST_NOEXEC, MS_NOEXEC),
    (os.ST_NOATIME, MS_NOATIME),
    (os.ST_NODIRATIME, MS_NODIRATIME),
    (os.ST_RELATIME, MS_RELATIME),
)
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}


def pivot_root(new_root: str, put_old: str) -> None:
    """Make the mount ``new_root`` the caller's root, the old one at ``put_old`` (then
    detach it with :func:`unmount`)."""
    number = _PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(errno.ENOSYS, f"pivot_root's number unknown on {os.uname().machine}")
    result = _libc.syscall(number, os.fsencode(new_root), os.fsencode(put_old))
    _check(result, "pivot_root")


def remount_read_only(path: str) -> None:
    """Make the mount on ``path`` read-only there (a per-mount flag: the file system
    stays writable elsewhere). Its other flags are kept: in a user namespace they
    are locked, and a remount that drops one fails."""
    kept = os.statvfs(path).f_flag
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY | sum(ms for st, ms in _STATVFS_FLAGS if kept & st)
    _check(_libc.mount(None, os.fsencode(path), None, flags, None), f"read-only {path}")


def mount_proc(path: str = "/proc") -> None:
    """A procfs of the caller's PID namespace on ``path``."""
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    _check(_libc.mount(b"proc", os.fsencode(path), b"proc", flags, None), f"mount {path}")


def unmount(path: str) -> None:
    """Detach the mount on ``path``; it is freed once nothing uses it any more."""
    _check(_libc.umount2(os.fsencode(path), MNT_DETACH), f"umount {path}")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in ("effective", "permitted", "inheritable")]


_CAP_HEADER = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
_NO_CAPS = (_CapData * 2)()


def drop_capabilities() -> None:
    """Empty the effective, permitted and inheritable (hence ambient) sets.

    With no_new_privs set, no exec brings any of them back, not even for uid 0.
    """
    _check(_libc.capset(ctypes.byref(_CAP_HEADER), _NO_CAPS), "capset")


# -- seccomp -------------------------------------------------------------------

# Denied calls and their numbers on x86_64 and aarch64 (-: the architecture has no such call).
_DENIED = """
socket              41  198
io_uring_setup     425  425
io_uring_enter     426  426
io_uring_register  427  427
chmod               90    -
fchmod              91   52
fchmodat           268   53
fchmodat2          452  452
chown               92    -
fchown              93   55
lchown              94    -
fchownat           260   54
utime              132    -
utimes             235    -
futimesat          261    -
utimensat          280   88
setxattr           188    5
lsetxattr          189    6
fsetxattr          190    7
removexattr        197   14
lremovexattr       198   15
fremovexattr       199   16
setxattrat         463  463
removexattrat      466  466
shmget              29  194
msgget              68  186
semget              64  190
mq_open            240  180
add_key            248  217
request_key        249  218
keyctl             250  219
ptrace             101  117
process_vm_readv   310  270
process_vm_writev  311  271
pidfd_getfd        438  438
unshare            272   97
setns              308  268
perf_event_open    298  241
kcmp               312  272
ioprio_set         251   30
setsid             112  157
inotify_init       253    -
inotify_init1      294   26
inotify_add_watch  254   27
fanotify_init      300  262
fanotify_mark      301  263
mincore             27  232
cachestat          451  451
fadvise64          221  223
readahead          187  213
process_madvise    440  440
"""
# setsid: a session is a scheduler autogroup here, a CPU share of its own; a policy's
# child making 60 of them took 98% of a CPU from the server. inotify and fanotify
# watches are not checked by Landlock: a policy could watch the data directory and
# another episode's scratch, and use up its uid's 128 inotify instances machine-wide.

# Calls on a process named by their first argument, allowed on the caller only (0 or its
# own pid): the kernel lets a process change another's limits and scheduling when both
# have the same uid, and every policy process, the template and the server have the same
# uid. Lowering the server's RLIMIT_NOFILE, or putting a concurrent episode on SCHED_IDLE,
# would be a denial of service. setpriority(which, who, nice) is allowed for which =
# PRIO_PROCESS and who naming the caller.
_SELF_ONLY = """
prlimit64          302  261
sched_setaffinity  203  122
sched_setscheduler 144  119
sched_setparam     142  118
sched_setattr      314  274
migrate_pages      256  238
move_pages         279  239
setpriority        141  140
"""
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_COLUMN = {"x86_64": 1, "aarch64": 2}
# machine -> (seccomp, clone, clone3)
_OWN_CALLS = {"x86_64": (317, 56, 435), "aarch64": (277, 220, 435)}
_X32_BIT = 0x40000000
_NAMESPACE_FLAGS = 0x7E020080  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWTIME
# machine -> (fcntl, setpgid, madvise, preadv2): allowed with some arguments only
_ARGUMENT_CHECKED = {"x86_64": (72, 109, 28, 327), "aarch64": (25, 154, 233, 286)}
_F_SETLEASE, _F_SETPIPE_SZ, _F_SETDELEG = 1024, 1031, 1040  # F_SETDELEG: Linux 6.19
_MADV_COLD, _MADV_PAGEOUT, _RWF_NOWAIT = 20, 21, 0x8

_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_SET_MODE_FILTER, _FLAG_SPEC_ALLOW = 1, 1 << 2


class _Instruction(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class Filter(ctypes.Structure):
    """``struct sock_fprog``; keeps its instruction array alive."""

    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Instruction))]
    syscall_nr: int = -1
    instructions: ctypes.Array[_Instruction] | None = None
    own_pid_slots: tuple[int, ...] = ()  # instructions that compare with the caller's pid


def _calls(table: str) -> dict[str, int]:
    column = _COLUMN.get(os.uname().machine)
    if column is None:
        return {}
    rows = [line.split() for line in table.strip().splitlines()]
    return {row[0]: int(row[column]) for row in rows if row[column] != "-"}


def denied_calls() -> dict[str, int]:
    """The calls the filter refuses on this machine, by name; empty where it has no filter."""
    return _calls(_DENIED)


def self_only_calls() -> dict[str, int]:
    """The calls the filter allows only on the calling process (see ``_SELF_ONLY``)."""
    return _calls(_SELF_ONLY)


def seccomp_filter() -> Filter | None:
    """The filter for this machine's architecture, or None where its numbers are unknown.

    Built once in the template; installing it costs a few tens of microseconds.
    """
    machine = os.uname().machine
    if machine not in _AUDIT_ARCH:
        return None
    audit_arch, (seccomp_nr, clone_nr, clone3_nr) = _AUDIT_ARCH[machine], _OWN_CALLS[machine]
    denied = sorted(set(denied_calls().values()))
    actions = dict.fromkeys(denied, "deny") | {clone3_nr: "enosys", clone_nr: "clone"}
    own = self_only_calls()
    actions |= dict.fromkeys(own.values(), "self") | {own["setpriority"]: "self who"}
    fcntl_nr, setpgid_nr, madvise_nr, preadv2_nr = _ARGUMENT_CHECKED[machine]
    actions |= {fcntl_nr: "fcntl", setpgid_nr: "setpgid"}
    actions |= {madvise_nr: "madvise", preadv2_nr: "preadv2"}
    # (code, jump-if-true target, jump-if-false target, k); targets are labels, resolved below.
    code: list[tuple[int, str | int, str | int, int]] = [
        (_LD_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ, 0, "deny", audit_arch),  # i386 / arm32 compat calls: deny all
        (_LD_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if audit_arch == 0xC000003E:
        code.append((_JGE, "deny", 0, _X32_BIT))
    labels: dict[str, int] = {}

    def search(numbers: list[int]) -> None:
        # A binary search: a handful of comparisons per call, and the kernel's per-call
        # cache of always-allowed numbers is cheap to compute when the filter is installed.
        if len(numbers) <= 3:
            code.extend((_JEQ, actions[nr], 0, nr) for nr in numbers)
            code.append((_RET, 0, 0, _ALLOW))
            return
        middle = len(numbers) // 2
        code.append((_JGE, f"from {numbers[middle]}", 0, numbers[middle]))
        search(numbers[:middle])
        labels[f"from {numbers[middle]}"] = len(code)
        search(numbers[middle:])

    search(sorted(actions))
    labels["clone"] = len(code)
    code.append((_LD_ABS, 0, 0, 16))  # low half of args[0]: the clone flags
    code.append((_JSET, "deny", 0, _NAMESPACE_FLAGS))
    code.append((_RET, 0, 0, _ALLOW))
    # Arguments are read by their low half: the kernel takes a pid_t, an int, from each.
    own_pid_slots: list[int] = []

    def the_caller(offset: int) -> None:
        """Allow the call if the argument at ``offset`` names the caller: 0, or its pid
        (filled in by install_filter); deny it otherwise."""
        code.append((_LD_ABS, 0, 0, offset))
        code.append((_JEQ, "allow", 0, 0))
        own_pid_slots.append(len(code))
        code.append((_JEQ, "allow", "deny", 0))

    labels["self who"] = len(code)  # setpriority(which, who, nice)
    code.append((_LD_ABS, 0, 0, 16))  # which
    code.append((_JEQ, 0, "deny", 0))  # PRIO_PROCESS
    the_caller(24)  # who
    labels["setpgid"] = len(code)  # setpgid(pid, group): a group of its own only
    the_caller(24)
    labels["self"] = len(code)  # the pid in args[0]
    the_caller(16)
    labels["madvise"] = len(code)  # madvise(addr, length, advice): no paging out
    code.append((_LD_ABS, 0, 0, 32))  # args[2]: the advice
    code.append((_JEQ, "deny", 0, _MADV_COLD))
    code.append((_JEQ, "deny", "allow", _MADV_PAGEOUT))
    labels["preadv2"] = len(code)  # preadv2(fd, iov, count, pos_l, pos_h, flags)
    code.append((_LD_ABS, 0, 0, 56))  # args[5]: the flags
    code.append((_JSET, "deny", "allow", _RWF_NOWAIT))
    labels["fcntl"] = len(code)  # no lease (it holds up another process's open) ...
    code.append((_LD_ABS, 0, 0, 24))  # args[1]: the command
    code.append((_JEQ, "deny", 0, _F_SETLEASE))
    code.append((_JEQ, "deny", 0, _F_SETDELEG))
    code.append((_JEQ, "deny", 0, _F_SETPIPE_SZ))  # ... nor grows the uid's pipe pages
    labels["allow"] = len(code)
    code.append((_RET, 0, 0, _ALLOW))
    labels["deny"] = len(code)
    code.append((_RET, 0, 0, _ERRNO | errno.EPERM))
    labels["enosys"] = len(code)
    code.append((_RET, 0, 0, _ERRNO | errno.ENOSYS))

    def offset(at: int, target: str | int) -> int:
        jump = labels[target] - at - 1 if isinstance(target, str) else target
        if not 0 <= jump < 256:
            raise ValueError(f"seccomp filter jump out of range at instruction {at}")
        return jump

    instructions = (_Instruction * len(code))(
        *(_Instruction(c, offset(i, jt), offset(i, jf), k) for i, (c, jt, jf, k) in enumerate(code))
    )
    program = Filter(len(code), ctypes.cast(instructions, ctypes.POINTER(_Instruction)))
    program.instructions = instructions
    program.syscall_nr = seccomp_nr
    program.own_pid_slots = tuple(own_pid_slots)
    return program


def install_filter(program: Filter, own_pid: int = 0) -> None:
    """Install the filter in the calling thread for good (needs no_new_privs set first).

    ``own_pid``: the pid that, beside 0, names the caller in the calls allowed on the
    caller only (its children inherit the filter, and so the same pid: their parent's).
    """
    if program.instructions is not None:
        for at in program.own_pid_slots:
            program.instructions[at].k = own_pid
    # SPEC_ALLOW: the policy is the only code in its process, so speculative-store-bypass
    # mitigation would cost its numeric code speed and protect nothing.
    for flags in (_FLAG_SPEC_ALLOW, 0):
        result = _libc.syscall(
            ctypes.c_long(program.syscall_nr),
            ctypes.c_long(_SET_MODE_FILTER),
            ctypes.c_long(flags),
            ctypes.byref(program),
        )
        if result == 0:
            return
        err = ctypes.get_errno()
        if err != errno.EINVAL:
            break
    raise OSError(err, f"cannot install the seccomp filter: {os.strerror(err)}")
