"""The policy runtime: the files a policy process may read, and a private copy of them.

:func:`policy_runtime` names what policies of every split read: the standard
library (without its test suites), numpy, the interpreter (and a virtual
environment's ``pyvenv.cfg``), the shared libraries all of those load
(followed through their ELF ``DT_NEEDED`` entries), ``/etc/ld.so.cache``,
``/etc/localtime`` and the C library's locale and gconv cache. The sandbox grants
exactly these (:mod:`evopolicy_mcp.kernel.sandbox`), nothing else of the
interpreter's prefixes or ``/usr/lib``.

A template of a hidden split (validation, assessment) runs from a private
copy of them (:func:`make_private`): a tmpfs in the template's own mount
namespace, each file copied there and bind-mounted read-only over its
original path, before the template's interpreter is started again from it
(:func:`~evopolicy_mcp.kernel.zygote.main`). Every page a policy process of
that template reads or maps, its inherited interpreter, numpy and C library
included, is then a page of that tmpfs, which no other process reads and
which goes when the template's last process ends: which pages an episode
touched can be read by no later one (:func:`foreign_mappings` checks the
mapped part). The copy reads every original page once, before any policy
runs, so it leaves nothing an episode chose.
"""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import struct
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass

from evopolicy_mcp.kernel import linux

__all__ = [
    "Copied",
    "Runtime",
    "copy_size",
    "foreign_mappings",
    "make_private",
    "mask",
    "policy_runtime",
]

# Left out of the copied trees: test suites, the static library and packages below the
# standard library (a virtual environment's are elsewhere), optimised byte code.
SKIPPED_DIRS = frozenset({"test", "tests", "idle_test", "site-packages", "dist-packages"})
SKIPPED_PREFIXES = ("config-",)
SKIPPED_SUFFIXES = (".opt-1.pyc", ".opt-2.pyc")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/localtime")
LOCALES = "/usr/lib/locale/C.utf8"
PACKAGES = ("numpy",)  # beside the standard library: what policies may import
MAX_BYTES = 1 << 30  # the private tmpfs's size cap
MAX_INODES = 1 << 16


def _beneath(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _skipped(name: str, is_dir: bool) -> bool:
    if is_dir:
        return name in SKIPPED_DIRS or name.startswith(SKIPPED_PREFIXES)
    return name.endswith(SKIPPED_SUFFIXES)


@dataclass(frozen=True)
class Runtime:
    """What policies may read (``grants``: folders and files) and the folders within
    them that show empty to policies (``masked``: test suites and the like, which the
    private copy leaves out; masked in every split, so that all see the same)."""

    grants: list[str]
    masked: list[str]

    def to_json(self) -> str:
        return json.dumps({"grants": self.grants, "masked": self.masked})

    @classmethod
    def from_json(cls, text: str | bytes) -> Runtime:
        data = json.loads(text)
        return cls(list(data["grants"]), list(data["masked"]))


def policy_runtime(runtime: Iterable[str]) -> Runtime:
    """The directories and files policies may read, all within ``runtime`` (the
    runtime directories, minus any that holds a hidden path) or the shared libraries."""
    roots = [os.path.realpath(p) for p in runtime]

    def granted(path: str) -> bool:
        return any(_beneath(path, root) for root in roots)

    trees: list[str] = []
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    if granted(stdlib):
        trees.append(stdlib)
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        package = os.path.realpath(list(spec.submodule_search_locations)[0])
        libs = package + ".libs"  # a wheel's vendored libraries (numpy.libs)
        trees += [p for p in (package, libs) if os.path.isdir(p) and granted(p)]
    binaries = [os.path.realpath(sys.executable)]
    skipped: list[str] = []
    for tree in trees:
        for folder, dirs, names in os.walk(tree):
            skipped += [os.path.join(folder, d) for d in dirs if _skipped(d, True)]
            dirs[:] = [d for d in dirs if not _skipped(d, True)]
            binaries += [os.path.join(folder, f) for f in names if ".so" in f]
    files = {p for p in _libraries(binaries) if granted(p) or p.startswith(("/usr/", "/lib"))}
    gconv = os.path.join("/usr/lib", multiarch(), "gconv", "gconv-modules.cache")  # C library
    files |= {p for p in (*SYSTEM_FILES, gconv) if os.path.isfile(p)}
    # A virtual environment's marker: without it the interpreter cannot start again there.
    venv = os.path.join(os.path.realpath(sys.prefix), "pyvenv.cfg")
    if os.path.isfile(venv) and granted(venv):
        files.add(venv)
    files = {p for p in files if not any(_beneath(p, tree) for tree in trees)}
    locales = [LOCALES] if os.path.isdir(LOCALES) else []
    grants = sorted(trees) + locales + sorted(files)
    # A skipped folder that holds a package (numpy below a system site-packages) stays.
    masked = [d for d in skipped if not any(_beneath(g, d) for g in grants)]
    return Runtime(grants, sorted(masked))


# -- shared libraries ----------------------------------------------------------------


def multiarch() -> str:
    return str(sysconfig.get_config_var("MULTIARCH") or "")


def _libraries(start: Iterable[str]) -> set[str]:
    """``start`` (ELF files) and every library they need, their interpreter included."""
    system = [os.path.join(base, multiarch()) for base in ("/lib", "/usr/lib", "/usr/local/lib")]
    system += ["/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib"]
    libdir = sysconfig.get_config_var("LIBDIR")
    if libdir:
        system.insert(0, libdir)
    seen: set[str] = set()
    todo = [os.path.realpath(p) for p in start]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        found = _elf(path)
        if found is None:
            continue
        needed, search, interpreter = found
        origin = os.path.dirname(path)
        folders = [d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin) for d in search]
        if interpreter:
            todo.append(os.path.realpath(interpreter))
        for name in needed:
            for folder in [*folders, *system]:
                candidate = os.path.join(folder, name)
                if os.path.isfile(candidate):
                    todo.append(os.path.realpath(candidate))
                    break
    return seen


_DT_NEEDED, _DT_RPATH, _DT_STRTAB, _DT_RUNPATH = 1, 15, 5, 29


@dataclass(frozen=True)
class _Segment:
    vaddr: int
    offset: int
    size: int


def _elf(path: str) -> tuple[list[str], list[str], str | None] | None:
    """A 64-bit little-endian ELF file's needed libraries, its RPATH/RUNPATH folders
    and its program interpreter; None for anything else. Reads only the pages that
    hold them (no readahead)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        head = os.pread(fd, 64, 0)
        if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            return None
        phoff = struct.unpack_from("<Q", head, 32)[0]
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        table = os.pread(fd, phentsize * phnum, phoff)
        loads: list[_Segment] = []
        dynamic: tuple[int, int] | None = None
        interpreter = None
        for i in range(phnum):
            kind, _flags, offset, vaddr, _paddr, filesz = struct.unpack_from(
                "<IIQQQQ", table, i * phentsize
            )
            if kind == 1:  # PT_LOAD
                loads.append(_Segment(vaddr, offset, filesz))
            elif kind == 2:  # PT_DYNAMIC
                dynamic = (offset, filesz)
            elif kind == 3:  # PT_INTERP
                interpreter = os.pread(fd, filesz, offset).rstrip(b"\0").decode()
        if dynamic is None:
            return [], [], interpreter
        raw = os.pread(fd, dynamic[1], dynamic[0])
        entries = [struct.unpack_from("<qQ", raw, i) for i in range(0, len(raw) - 15, 16)]
        strtab = next((v for t, v in entries if t == _DT_STRTAB), None)
        base = next((s for s in loads if s.vaddr <= (strtab or 0) < s.vaddr + s.size), None)
        if strtab is None or base is None:
            return [], [], interpreter
        table_at = strtab - base.vaddr + base.offset

        def text(index: int) -> str:
            return os.pread(fd, 4096, table_at + index).split(b"\0", 1)[0].decode()

        needed = [text(v) for t, v in entries if t == _DT_NEEDED]
        search = [
            d for t, v in entries if t in (_DT_RPATH, _DT_RUNPATH) for d in text(v).split(":")
        ]
        return needed, [d for d in search if d], interpreter
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


# -- the private copy ----------------------------------------------------------------


@dataclass(frozen=True)
class Copied:
    """What :func:`make_private` did: files, bytes, and the copy's device."""

    files: int
    bytes: int
    device: int


def make_private(runtime: Runtime, staging: str) -> Copied:
    """In a new private mount namespace of the calling single-threaded process: copy
    the policy runtime to a tmpfs mounted on ``staging`` and bind each of its paths
    read-only over the original. ``staging`` is an empty directory, and is one again
    afterwards: the tmpfs lives on in the binds alone. Raises OSError."""
    linux.enter_private_mounts()
    linux.mount_tmpfs(staging, MAX_BYTES, MAX_INODES, executables=True, mode=0o755)
    files = size = 0
    try:
        for path in runtime.grants:
            target = staging + path
            os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
            if os.path.isdir(path):
                n, b = _copy_tree(path, target)
            else:
                n, b = 1, _copy_file(path, target, os.stat(path))
            files, size = files + n, size + b
        device = os.stat(staging).st_dev
        bound: list[str] = []
        for path in sorted(runtime.grants, key=len):
            if any(_beneath(path, outer) for outer in bound):
                continue  # shown already, inside its folder's copy
            _bind(staging + path, path)
            bound.append(path)
    finally:
        linux.unmount(staging)
    return Copied(files, size, device)


def mask(folders: list[str], staging: str) -> None:
    """In the caller's private mount namespace: show each of ``folders`` as an empty
    read-only folder, as the private copy has them. ``staging`` as for make_private."""
    linux.mount_tmpfs(staging, 4096, 8, mode=0o755)
    try:
        empty = os.path.join(staging, "empty")
        os.mkdir(empty, 0o755)
        for folder in folders:
            _bind(empty, folder)
    finally:
        linux.unmount(staging)


def _bind(source: str, target: str) -> None:
    fd = os.open(source, os.O_PATH | os.O_CLOEXEC)
    try:
        linux.bind_mount(fd, target, read_only=True)
    finally:
        os.close(fd)


def _copy_tree(source: str, target: str) -> tuple[int, int]:
    os.makedirs(target, mode=0o755, exist_ok=True)
    files = size = 0
    with os.scandir(source) as it:
        entries = list(it)
    for entry in entries:
        to = os.path.join(target, entry.name)
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), to)
        elif entry.is_dir():
            if _skipped(entry.name, True):
                os.mkdir(to, 0o755)  # shown empty, as masked in every split
            else:
                n, b = _copy_tree(entry.path, to)
                files, size = files + n, size + b
        elif entry.is_file() and not _skipped(entry.name, False):
            files, size = files + 1, size + _copy_file(entry.path, to, entry.stat())
    st = os.stat(source)
    os.chmod(target, stat.S_IMODE(st.st_mode))
    return files, size


def _copy_file(source: str, target: str, st: os.stat_result) -> int:
    """Copy one file's bytes (inside the kernel), mode and times (byte code checks its
    source's modification time); returns its size."""
    src = os.open(source, os.O_RDONLY | os.O_CLOEXEC)
    try:
        dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            while os.sendfile(dst, src, None, 1 << 30):
                pass
            os.fchmod(dst, stat.S_IMODE(st.st_mode))
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(dst)
    finally:
        os.close(src)
    return st.st_size


def copy_size(runtime: Runtime) -> tuple[int, int]:
    """The files and bytes :func:`make_private` copies (without copying them)."""
    files = size = 0
    for path in runtime.grants:
        if not os.path.isdir(path):
            files, size = files + 1, size + os.path.getsize(path)
            continue
        for folder, dirs, names in os.walk(path):
            dirs[:] = [d for d in dirs if not _skipped(d, True)]
            for name in names:
                full = os.path.join(folder, name)
                if not _skipped(name, False) and not os.path.islink(full):
                    files, size = files + 1, size + os.path.getsize(full)
    return files, size


def foreign_mappings(device: int) -> list[str]:
    """The files this process maps that are not on ``device`` (the private copy's)."""
    major, minor = os.major(device), os.minor(device)
    foreign = []
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            if len(fields) < 6 or not fields[5].startswith("/") or int(fields[4]) == 0:
                continue
            path = fields[5].rstrip("\n")
            if path.startswith(("/dev/", "/memfd:")) or path.endswith(" (deleted)"):
                continue
            dev_major, dev_minor = (int(x, 16) for x in fields[3].split(":"))
            if (dev_major, dev_minor) != (major, minor) and path not in foreign:
                foreign.append(path)
    return foreign
