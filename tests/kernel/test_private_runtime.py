"""Hidden episodes read a private copy of the runtime: which pages they touch is theirs.

A writer policy touches a chosen half of some pages of a runtime file (numpy's
``_simd`` extension, which nothing else loads); a reader policy, in a later
training evaluation of another host process, times a first read of each.
In the control, the writer runs in a training evaluation and the reader sees
the pattern; when the writer runs in a hidden split (validation), it touches
pages of its private copy only, and the reader sees none of it.

The test drops the file's pages from the page cache from the host's side
(``posix_fadvise(DONTNEED)``, as root) before each writer, and again once the
hidden template has copied the file (the copy reads every page), so that
only what the writer does can make a page resident.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import random
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy
import pytest

from tests.support.kernel import needs

_PACKAGE = Path(numpy.__file__).parent
_FOUND = sorted(_PACKAGE.glob("core/_simd.*.so")) + sorted(_PACKAGE.glob("_core/_simd.*.so"))
TARGET = _FOUND[0] if _FOUND else None
PAGE = mmap.PAGESIZE
SLOTS = 32
SPACING = 16  # pages between slots: one slot per fault-around window (64 KiB)
FIRST = 64  # the first slot's page: past the ELF headers, which a template start reads
PATTERN = random.Random(23).sample(range(SLOTS), SLOTS // 2)  # the slots the writer touches

_TAIL = """
    return Policy()

class Policy:
    def act(self, observation):
        return 0
"""

WRITER = (
    """
import mmap, time

def make_policy(context):
    time.sleep({pause})  # (the test drops what the hidden template's copy read)
    with open({path!r}, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    m.madvise(mmap.MADV_RANDOM)  # a fault reads its page alone
    total = 0
    for slot in {pattern!r}:
        total += m[({first} + slot * {spacing}) * {page}]
"""
    + _TAIL
)

READER = (
    """
import mmap, random, sys, time

def make_policy(context):
    with open({path!r}, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    m.madvise(mmap.MADV_RANDOM)
    order = list(range({slots}))
    random.Random(5).shuffle(order)
    times = {{}}
    for slot in order:
        at = ({first} + slot * {spacing}) * {page}
        start = time.perf_counter_ns()
        m[at]
        times[slot] = time.perf_counter_ns() - start
    print("times", [times[s] for s in range({slots})], file=sys.stderr)
"""
    + _TAIL
)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_long]  # fmt: skip
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def _resident(path: Path) -> list[bool]:
    """Which slots' pages are in the page cache (the host's view: mincore)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value)
        try:
            vec = (ctypes.c_ubyte * ((size + PAGE - 1) // PAGE))()
            assert _libc.mincore(addr, size, vec) == 0, ctypes.get_errno()
            return [bool(vec[FIRST + slot * SPACING] & 1) for slot in range(SLOTS)]
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def _drop(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _program(tmp_path: Path, source: str) -> Path:
    program = tmp_path / uuid.uuid4().hex
    program.mkdir()
    (program / "policy.py").write_text(source)
    return program


def _evaluate(program: Path, split: str) -> subprocess.Popen[str]:
    """One episode of ``program`` in ``split``, by a host process of its own."""
    command = [sys.executable, "-m", "evopolicy_mcp", "evaluate", str(program),
               "--task", "cartpole", "--split", split, "--episodes", "1", "--json"]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _episode(proc: subprocess.Popen[str]) -> str:
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-2000:]
    episode = json.loads(stdout)["episode_summaries"][0]
    assert episode["status"] == "ok", episode
    return str(episode.get("stderr") or "")


def _write(tmp_path: Path, split: str) -> tuple[list[bool], bool]:
    """Run the writer in ``split``; the slots resident in the shared page cache after it,
    and whether its template copied the file.

    While it runs, pages of the file that all turn resident were read by the hidden
    template's copy, not the writer (which touches half of them, after a pause):
    they are dropped again once the copy is done."""
    assert TARGET is not None
    _drop(TARGET)
    assert not any(_resident(TARGET)), "the test cannot drop the file's pages"
    source = WRITER.format(
        path=str(TARGET), pattern=PATTERN, first=FIRST, spacing=SPACING, page=PAGE, pause=1.5
    )
    proc = _evaluate(_program(tmp_path, source), split)
    copied = False
    while proc.poll() is None:
        if all(_resident(TARGET)):  # the copy is reading the file: let it finish
            time.sleep(0.3)
            _drop(TARGET)
            copied = True
        time.sleep(0.002)
    _episode(proc)
    return _resident(TARGET), copied


def _read(tmp_path: Path) -> list[int]:
    """First-read times of each slot, in nanoseconds, timed by a training policy."""
    assert TARGET is not None
    source = READER.format(path=str(TARGET), slots=SLOTS, first=FIRST, spacing=SPACING, page=PAGE)
    out = _episode(_evaluate(_program(tmp_path, source), "train"))
    line = next(x for x in out.splitlines() if x.startswith("times "))
    return [int(t) for t in json.loads(line.split(" ", 1)[1])]


def _split(times: list[int]) -> tuple[list[int], list[int]]:
    touched = [t for slot, t in enumerate(times) if slot in PATTERN]
    return touched, [t for slot, t in enumerate(times) if slot not in PATTERN]


@needs("filesystem", "disk")
@pytest.mark.skipif(TARGET is None, reason="this numpy has no _simd extension")
@pytest.mark.skipif(os.geteuid() != 0, reason="dropping the page cache of a file needs root")
def test_pages_a_hidden_episode_touches_cannot_be_read_by_timing_in_a_later_episode(
    tmp_path: Path,
) -> None:
    # The control: a training writer leaves its pattern, and the timing reader sees it.
    resident, copied = _write(tmp_path, "train")
    assert not copied
    assert [slot for slot in range(SLOTS) if resident[slot]] == sorted(PATTERN)
    touched, untouched = _split(_read(tmp_path))
    threshold = statistics.median(touched) * statistics.median(untouched)
    threshold **= 0.5  # the geometric mean: cached and uncached reads differ many times over
    assert statistics.median(untouched) > 3 * statistics.median(touched), (touched, untouched)
    looks_cached = [sum(t < threshold for t in group) for group in (touched, untouched)]
    assert looks_cached[0] >= len(touched) - 2 and looks_cached[1] <= 2, (touched, untouched)

    # The same writer in a hidden split: no page of the shared file becomes resident,
    # and the reader's threshold tells touched and untouched slots apart no better than
    # chance (every slot reads as uncached).
    resident, copied = _write(tmp_path, "validation")
    assert not any(resident), [slot for slot in range(SLOTS) if resident[slot]]
    touched, untouched = _split(_read(tmp_path))
    looks_cached = [sum(t < threshold for t in group) for group in (touched, untouched)]
    assert looks_cached[0] <= 2 and abs(looks_cached[0] - looks_cached[1]) <= 2, (
        touched,
        untouched,
    )
    assert copied, "the hidden split's template did not copy the runtime"


# Standard modules that load shared libraries of their own when imported, and files
# outside the policy runtime (another installed package: denied; the standard library's
# test suite: shown empty): the same answers in a training and a hidden split.
_OTHER_PACKAGE = str(Path(pytest.__file__))
_TEST_SUITE = str(Path(os.__file__).parent / "test" / "__init__.py")
SAME_RUNTIME = (
    f"""
import sys

def make_policy(context):
    found = []
    for name in ("ssl", "sqlite3", "lzma", "bz2", "ctypes", "decimal", "zlib", "uuid",
                 "hashlib", "numpy.linalg", "numpy.fft", "numpy.random"):
        __import__(name)
        found.append(name)
    for path in ({_OTHER_PACKAGE!r}, {_TEST_SUITE!r}):
        try:
            open(path, "rb").close()
            found.append("read " + path)
        except OSError as exc:
            found.append(f"{{type(exc).__name__}} " + path)
    print("|".join(found), file=sys.stderr)
"""
    + _TAIL
)


@needs("filesystem", "disk")
def test_training_and_hidden_splits_see_the_same_runtime(tmp_path: Path) -> None:
    program = _program(tmp_path, SAME_RUNTIME)
    train, hidden = (_episode(_evaluate(program, split)) for split in ("train", "test"))
    assert train == hidden, (train, hidden)
    assert "read " not in train, train
    assert train.count("PermissionError") == train.count("FileNotFoundError") == 1, train
