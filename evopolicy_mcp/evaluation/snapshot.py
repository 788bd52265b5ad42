"""Program snapshots: immutable, content-addressed copies of a policy directory. Stdlib only.

A program is a directory with ``policy.py`` at its top and any helper files
beside it. :func:`capture` copies a directory, :func:`capture_files` writes an
inline program (relative path -> text); both give the same :class:`Program`
for the same content. A snapshot lives at ``store_dir/<digest>/``, read-only,
and :func:`open_program` re-opens it after a restart, checking its digest.

Invariant: a program that fails to capture costs the agent nothing. Every
problem with the program itself (a symlink, a special file, a file too large,
a syntax error) is found here, before any budget is reserved, and raised as
:class:`ProgramError` whose message says what to fix. Faults of the host's own
store (a full disk) stay ``OSError``: they are not the agent's doing.

The digest is the sha256 of a canonical manifest: for each file, in sorted
order of its relative posix path, ``path NUL sha256-hex(content) LF``.
``__pycache__/``, ``.git`` and ``*.pyc`` are left out of a program, both when
capturing and when re-opening (a policy process may leave bytecode behind).

Source files are read through directory file descriptors with
``O_NOFOLLOW``, never by path, so a symlink swapped in while the copy runs is
still rejected and nothing outside the program directory is ever read. A
caller that opened and checked the folder itself passes its descriptor, so
the copy reads the very folder that was checked; ``exclude`` names folders
(by device and inode) the copy refuses to enter, such as the host's records.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import stat
import tempfile
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ENTRY",
    "Program",
    "ProgramError",
    "SnapshotLimits",
    "capture",
    "capture_files",
    "open_program",
    "read_files",
    "restore",
]

ENTRY = "policy.py"
_MIB = 1024 * 1024
_IGNORED_NAMES = frozenset({"__pycache__", ".git"})
_IGNORED_SUFFIX = ".pyc"
_DIGEST_RE = re.compile(r"[0-9a-f]{64}")
_FILE_MODE = 0o444
_DIR_MODE = 0o555
_MAX_NAME_BYTES = 255
_READ_CHUNK = 256 * 1024
# warnings.catch_warnings swaps process-global state; serialise our own uses of it.
_COMPILE_LOCK = threading.Lock()


class ProgramError(Exception):
    """The program cannot be captured or re-opened; the message says what to fix."""


@dataclass(frozen=True)
class SnapshotLimits:
    """Bounds on what a program may hold.

    ``max_depth`` is how many folders deep a file may sit: ``policy.py`` is at
    depth 0, ``helpers/x.py`` at depth 1.
    """

    max_files: int = 256
    max_file_bytes: int = 2 * _MIB
    max_total_bytes: int = 8 * _MIB
    max_depth: int = 8
    # Python sources are compiled at capture, on the host: bound what that may cost.
    max_source_bytes: int = 256 * 1024
    max_total_source_bytes: int = 1 * _MIB


@dataclass(frozen=True)
class Program:
    """An immutable snapshot: ``path`` is its read-only directory in the store."""

    digest: str
    path: Path
    files: tuple[str, ...]
    size: int


def capture(
    source_dir: str | os.PathLike[str] | int,
    store_dir: str | os.PathLike[str],
    *,
    limits: SnapshotLimits = SnapshotLimits(),  # frozen, so sharing it is safe
    exclude: frozenset[tuple[int, int]] = frozenset(),
) -> Program:
    """Copy the policy directory ``source_dir`` (a path, or an open directory descriptor
    that stays the caller's) into the store and return its snapshot.

    ``source_dir`` itself may be reached through a symlink; nothing inside it
    may be one, nor a folder whose ``(st_dev, st_ino)`` is in ``exclude``.
    Raises :class:`ProgramError` for anything wrong with the program.
    """
    if isinstance(source_dir, int):
        files = _walk_tree(os.dup(source_dir), _Accumulator(limits, exclude))
    else:
        files = _read_tree(Path(source_dir), limits, follow_root=True, name="program folder")
    return _store(files, store_dir, limits)


def capture_files(
    files: Mapping[str, str],
    store_dir: str | os.PathLike[str],
    *,
    limits: SnapshotLimits = SnapshotLimits(),  # frozen, so sharing it is safe
) -> Program:
    """Store an inline program given as relative posix path -> text (written as UTF-8).

    The same content captured inline or from a directory gets the same digest::

        capture_files({"policy.py": src, "helpers/util.py": util}, store_dir)
    """
    if not isinstance(files, Mapping):
        raise ProgramError("files must map relative paths (like 'policy.py') to their text")
    acc = _Accumulator(limits)
    given: dict[str, str] = {}
    for name, text in files.items():
        relpath = _normalise_inline(name)
        if relpath in given:
            raise ProgramError(
                f"{given[relpath]!r} and {name!r} both name {relpath}; send each file once"
            )
        given[relpath] = name
        if not isinstance(text, str):
            raise ProgramError(
                f"the content of {relpath} is {type(text).__name__}, not text; "
                "send each file's source as a string"
            )
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ProgramError(
                f"{relpath} holds a character that is not valid Unicode at position "
                f"{exc.start}; remove it"
            ) from None
        _check_depth(relpath, relpath.count("/"), limits)
        acc.add(relpath, data)
    for relpath in acc.files:
        parent = relpath
        while "/" in parent:
            parent = parent.rsplit("/", 1)[0]
            if parent in acc.files:
                raise ProgramError(
                    f"{parent} is both a file and a folder (of {relpath}); rename one of them"
                )
    return _store(acc.files, store_dir, acc.limits)


def open_program(
    store_dir: str | os.PathLike[str],
    digest: str,
    *,
    limits: SnapshotLimits = SnapshotLimits(),  # frozen, so sharing it is safe
) -> Program:
    """Re-open the snapshot ``digest`` in the store, verifying its content against the digest."""
    if not isinstance(digest, str) or not _DIGEST_RE.fullmatch(digest):
        raise ProgramError(f"{digest!r} is not a program digest (64 lowercase hex characters)")
    path = Path(os.path.abspath(store_dir)) / digest
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        raise ProgramError(f"no program {digest} in the store; capture it again") from None
    if not stat.S_ISDIR(mode):
        raise ProgramError(f"program {digest} in the store is not a folder; capture it again")
    try:
        files = _read_tree(path, limits, follow_root=False, name="snapshot")
    except ProgramError as exc:
        raise ProgramError(
            f"program {digest} in the store is damaged ({exc}); capture it again"
        ) from None
    actual = _digest(files)
    if actual != digest:
        raise ProgramError(
            f"program {digest} in the store was modified (its files now hash to "
            f"{actual}); capture it again from its source"
        )
    return Program(digest=digest, path=path, files=tuple(sorted(files)), size=_size(files))


def read_files(program: Program) -> dict[str, bytes]:
    """A snapshot's files (relative posix path -> content), to send elsewhere."""
    return _read_tree(program.path, SnapshotLimits(), follow_root=False, name="snapshot")


def restore(
    files: Mapping[str, bytes],
    store_dir: str | os.PathLike[str],
    digest: str,
    *,
    limits: SnapshotLimits = SnapshotLimits(),  # frozen, so sharing it is safe
) -> Program:
    """Store a snapshot sent from elsewhere (:func:`read_files`): the same checks as a
    capture, and its files must hash to ``digest``."""
    acc = _Accumulator(limits)
    for name, data in files.items():
        relpath = _normalise_inline(name)
        _check_depth(relpath, relpath.count("/"), limits)
        if not isinstance(data, bytes):
            raise ProgramError(f"the content of {relpath} is not bytes")
        acc.add(relpath, data)
    actual = _digest(acc.files)
    if actual != digest:
        raise ProgramError(f"the program sent as {digest} hashes to {actual}")
    return _store(acc.files, store_dir, limits)


class _Accumulator:
    """Collects file contents while enforcing the limits, failing as early as possible."""

    def __init__(
        self, limits: SnapshotLimits, exclude: frozenset[tuple[int, int]] = frozenset()
    ) -> None:
        self.limits = limits
        self.exclude = exclude
        self.files: dict[str, bytes] = {}
        self.total = 0
        self.dirs = 0

    def check_size(self, relpath: str, size: int) -> None:
        if size > self.limits.max_file_bytes:
            raise ProgramError(
                f"{relpath} is {size} bytes; a file may hold at most "
                f"{self.limits.max_file_bytes} bytes; make it smaller or leave it out"
            )
        if self.total + size > self.limits.max_total_bytes:
            raise ProgramError(
                f"the program is over {self.limits.max_total_bytes} bytes in total "
                f"(reached at {relpath}); leave out data files it does not need"
            )

    def add(self, relpath: str, data: bytes) -> None:
        if len(self.files) >= self.limits.max_files:
            raise ProgramError(
                f"the program has more than {self.limits.max_files} files (reached at "
                f"{relpath}); leave out files it does not need"
            )
        self.check_size(relpath, len(data))
        self.files[relpath] = data
        self.total += len(data)

    def add_dir(self, relpath: str) -> None:
        self.dirs += 1
        # A program never needs more folders than files; this bounds the walk.
        if self.dirs > self.limits.max_files:
            raise ProgramError(
                f"the program has more than {self.limits.max_files} folders (reached at "
                f"{relpath}); leave out folders it does not need"
            )


def _ignored(name: str) -> bool:
    return name in _IGNORED_NAMES or name.endswith(_IGNORED_SUFFIX)


def _check_component(part: str, relpath: str) -> None:
    """Reject names that cannot round-trip between a directory and an inline program."""
    if "\\" in part:
        raise ProgramError(f"{relpath!r} has a backslash in its name; separate folders with /")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in part):
        raise ProgramError(f"{relpath!r} has a control character in its name; rename it")
    try:
        encoded = part.encode("utf-8")
    except UnicodeEncodeError:
        raise ProgramError(f"{relpath!r} has a name that is not valid UTF-8; rename it") from None
    if len(encoded) > _MAX_NAME_BYTES:
        raise ProgramError(f"{relpath!r} has a name longer than {_MAX_NAME_BYTES} bytes")


def _check_depth(relpath: str, depth: int, limits: SnapshotLimits) -> None:
    if depth > limits.max_depth:
        raise ProgramError(
            f"{relpath} is {depth} folders deep; the limit is {limits.max_depth}; "
            "flatten the program"
        )


def _normalise_inline(name: object) -> str:
    if not isinstance(name, str):
        raise ProgramError(f"file names must be strings, got {type(name).__name__}")
    if not name:
        raise ProgramError("a file has an empty name; give each file a path like 'policy.py'")
    if "\0" in name:
        raise ProgramError(f"{name!r} has a NUL character in its name; rename it")
    if "\\" in name:
        raise ProgramError(f"{name!r} has a backslash; separate folders with /")
    if name.startswith("/"):
        raise ProgramError(
            f"{name!r} is an absolute path; give paths relative to the program, like 'helpers/x.py'"
        )
    if name.endswith("/"):
        raise ProgramError(f"{name!r} names a folder; give the path of each file instead")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ProgramError(
            f"{name!r} escapes the program folder with '..'; keep every file inside it"
        )
    if not parts:
        raise ProgramError(f"{name!r} names no file; give a path like 'policy.py'")
    relpath = "/".join(parts)
    for part in parts:
        _check_component(part, relpath)
        if _ignored(part):
            raise ProgramError(
                f"{relpath} is a cache or version-control file, which programs leave out; "
                "drop it from the files"
            )
    return relpath


def _read_tree(
    root: Path, limits: SnapshotLimits, *, follow_root: bool, name: str
) -> dict[str, bytes]:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    if not follow_root:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(root, flags)
    except FileNotFoundError:
        raise ProgramError(
            f"{name} {root} does not exist; write policy.py there or give the folder that holds it"
        ) from None
    except NotADirectoryError:
        raise ProgramError(
            f"{name} {root} is not a folder; give the folder that holds policy.py"
        ) from None
    except OSError as exc:
        raise ProgramError(f"cannot open {name} {root}: {exc.strerror}") from None
    return _walk_tree(fd, _Accumulator(limits))


def _walk_tree(fd: int, acc: _Accumulator) -> dict[str, bytes]:
    """The files under the directory ``fd`` (closed here)."""
    try:
        _walk(fd, "", acc)
    finally:
        os.close(fd)
    return acc.files


def _walk(dir_fd: int, prefix: str, acc: _Accumulator) -> None:
    if acc.exclude:
        st = os.fstat(dir_fd)
        if (st.st_dev, st.st_ino) in acc.exclude:
            where = prefix.rstrip("/") or "the program folder"
            raise ProgramError(
                f"{where} is the server's records, which no program may hold; keep your "
                "program in a working directory of your own"
            )
    limit = 2 * acc.limits.max_files
    entries: list[os.DirEntry[str]] = []
    with os.scandir(dir_fd) as it:
        for entry in it:
            if _ignored(entry.name):
                continue
            entries.append(entry)
            if len(entries) > limit:
                where = prefix.rstrip("/") or "the top folder"
                raise ProgramError(
                    f"{where} holds more than {limit} entries; the program may have at most "
                    f"{acc.limits.max_files} files; leave out files it does not need"
                )
    for entry in sorted(entries, key=lambda e: e.name):
        relpath = prefix + entry.name
        _check_component(entry.name, relpath)
        try:
            if entry.is_symlink():
                raise _symlink_error(relpath)
            if entry.is_dir(follow_symlinks=False):
                _walk_dir(dir_fd, entry.name, relpath, acc)
            elif entry.is_file(follow_symlinks=False):
                _read_file(dir_fd, entry.name, relpath, acc)
            else:
                raise _special_error(relpath, entry.stat(follow_symlinks=False).st_mode)
        except OSError as exc:
            raise ProgramError(
                f"cannot read {relpath}: {exc.strerror}; check that it can be read"
            ) from None


def _walk_dir(parent_fd: int, name: str, relpath: str, acc: _Accumulator) -> None:
    _check_depth(relpath + "/", relpath.count("/") + 1, acc.limits)
    acc.add_dir(relpath)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=parent_fd)
    except OSError as exc:
        # ELOOP/ENOTDIR: it was replaced by a symlink after the scan.
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _symlink_error(relpath) from None
        raise
    try:
        _walk(fd, relpath + "/", acc)
    finally:
        os.close(fd)


def _read_file(dir_fd: int, name: str, relpath: str, acc: _Accumulator) -> None:
    # O_NONBLOCK: a fifo swapped in after the scan must not hang the open.
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _symlink_error(relpath) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _special_error(relpath, st.st_mode)
        acc.check_size(relpath, st.st_size)
        # Read one byte past the limit: a file growing during the copy is caught too.
        bound = acc.limits.max_file_bytes + 1
        chunks: list[bytes] = []
        got = 0
        while got < bound:
            chunk = os.read(fd, min(_READ_CHUNK, bound - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        acc.add(relpath, b"".join(chunks))
    finally:
        os.close(fd)


def _symlink_error(relpath: str) -> ProgramError:
    return ProgramError(
        f"program has a symlink at {relpath}; copy the file or folder instead of linking it"
    )


def _special_error(relpath: str, mode: int) -> ProgramError:
    if stat.S_ISFIFO(mode):
        kind = "named pipe (fifo)"
    elif stat.S_ISSOCK(mode):
        kind = "socket"
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "device file"
    else:
        kind = "special file"
    return ProgramError(
        f"program has a {kind} at {relpath}; only regular files and folders can be "
        "captured; remove it"
    )


def _compile_sources(files: Mapping[str, bytes], limits: SnapshotLimits) -> None:
    """Compile every ``.py`` file (never run it) so syntax errors cost nothing.

    Compiling costs the host time and memory in proportion to the source, so
    sources are bounded first (a 2 MB list literal takes seconds and ~700 MB)."""
    sources = {p: data for p, data in files.items() if p.endswith(".py")}
    for relpath, data in sources.items():
        if len(data) > limits.max_source_bytes:
            raise ProgramError(
                f"{relpath} is {len(data)} bytes; Python sources may be at most "
                f"{limits.max_source_bytes} bytes each: move data into a non-.py file "
                "(e.g. JSON or .npy) and load it"
            )
    if sum(map(len, sources.values())) > limits.max_total_source_bytes:
        raise ProgramError(
            f"the program's Python sources exceed {limits.max_total_source_bytes} bytes in "
            "all; move data into non-.py files and load it"
        )
    with _COMPILE_LOCK, warnings.catch_warnings():
        # Warnings about the agent's code (invalid escapes...) are not the host's to print.
        warnings.simplefilter("ignore")
        for relpath in sorted(files):
            if not relpath.endswith(".py"):
                continue
            # Bytes, not text: the interpreter honours a coding cookie the same way on import.
            try:
                compile(files[relpath], relpath, "exec", dont_inherit=True)
            except SyntaxError as exc:
                where = f"{relpath} line {exc.lineno}" if exc.lineno else relpath
                raise ProgramError(f"{where}: {exc.msg}; fix it and submit again") from None
            except ValueError as exc:  # NUL bytes in the source (a SyntaxError from 3.12)
                raise ProgramError(f"{relpath}: {exc}; fix it and submit again") from None
            except (RecursionError, MemoryError):
                raise ProgramError(
                    f"{relpath}: too deeply nested to compile; simplify it and submit again"
                ) from None


def _digest(files: Mapping[str, bytes]) -> str:
    manifest = hashlib.sha256()
    for relpath in sorted(files):
        content = hashlib.sha256(files[relpath]).hexdigest()
        manifest.update(relpath.encode("utf-8") + b"\0" + content.encode("ascii") + b"\n")
    return manifest.hexdigest()


def _size(files: Mapping[str, bytes]) -> int:
    return sum(len(data) for data in files.values())


def _store(
    files: dict[str, bytes], store_dir: str | os.PathLike[str], limits: SnapshotLimits
) -> Program:
    if ENTRY not in files:
        raise ProgramError(
            f"the program has no {ENTRY} at its top; add {ENTRY} defining make_policy(context)"
        )
    _compile_sources(files, limits)
    digest = _digest(files)
    store = Path(os.path.abspath(store_dir))
    path = store / digest
    _write_snapshot(files, store, path)
    return Program(digest=digest, path=path, files=tuple(sorted(files)), size=_size(files))


def _write_snapshot(files: Mapping[str, bytes], store: Path, final: Path) -> None:
    """Write into a temp dir beside ``final`` and rename it in: all or nothing."""
    store.mkdir(parents=True, exist_ok=True)
    if _is_real_dir(final):
        return
    tmp = Path(tempfile.mkdtemp(prefix=".incoming-", dir=store))
    try:
        dirs = {tmp}
        for relpath, data in files.items():
            target = tmp / relpath
            for parent in reversed(target.relative_to(tmp).parents[:-1]):
                folder = tmp / parent
                if folder not in dirs:
                    folder.mkdir()
                    dirs.add(folder)
            _write_file(target, data)
        # Deepest first: a read-only folder cannot take new entries (unless root).
        for folder in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
            os.chmod(folder, _DIR_MODE)
            _fsync_dir(folder)
        try:
            os.rename(tmp, final)
        except OSError as exc:
            # Another capture of the same content got there first: reuse it.
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY) and _is_real_dir(final):
                _remove_tree(tmp)
                return
            raise
    except BaseException:
        _remove_tree(tmp)
        raise
    _fsync_dir(store)


def _write_file(target: Path, data: bytes) -> None:
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fchmod(fd, _FILE_MODE)
        os.fsync(fd)
    finally:
        os.close(fd)


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_tree(path: Path) -> None:
    if not os.path.lexists(path):
        return
    # Read-only folders would refuse the deletion for anyone but root.
    for folder, _subdirs, _files in os.walk(path):
        os.chmod(folder, 0o700)
    shutil.rmtree(path, ignore_errors=True)
