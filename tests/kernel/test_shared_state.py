"""No state one episode leaves in files others read can be read by a later episode.

Each test is a writer and a reader: the writer, one episode of one evaluation in
one host process, tries to leave a bit in a runtime file every policy can read;
the reader, an episode of another evaluation in another host process, tries to
read it. The reader must see the same whichever bit the writer left. Timing a
first read of a page a hidden episode touched: tests/kernel/test_private_runtime.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import uuid
from pathlib import Path

from tests.support.kernel import needs

STDLIB = Path(sysconfig.get_paths()["stdlib"])
# Runtime files no test and no host reads: the page cache and atime of each are the
# writer's and the reader's alone.
CACHED = STDLIB / "pydoc_data" / "topics.py"
STAMPED = STDLIB / "this.py"

_POLICY_TAIL = """
    return Policy()

class Policy:
    def act(self, observation):
        return 0
"""

CACHE_WRITER = (
    """
import os

def make_policy(context):
    fd = os.open({path!r}, os.O_RDONLY)
    try:
        if {bit}:
            while os.read(fd, 1 << 20):  # every page cached
                pass
        else:
            try:  # every page dropped
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            except OSError as exc:
                print("fadvise", exc.errno)
    finally:
        os.close(fd)
"""
    + _POLICY_TAIL
)

CACHE_READER = (
    """
import ctypes, errno, os

def make_policy(context):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    fd = os.open({path!r}, os.O_RDONLY)
    size = os.fstat(fd).st_size
    pages = (size + 4095) // 4096
    addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED: faults in nothing
    vec = (ctypes.c_ubyte * pages)()
    if libc.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(size), vec) == 0:
        print("mincore", sum(v & 1 for v in vec))
    else:
        print("mincore errno", ctypes.get_errno())
    try:
        os.preadv(fd, [bytearray(4096)], 4096 * (pages // 2), os.RWF_NOWAIT)
        print("nowait cached")
    except OSError as exc:
        print("nowait errno", exc.errno)
    os.close(fd)
"""
    + _POLICY_TAIL
)

STAMP_WRITER = (
    """
def make_policy(context):
    if {bit}:
        with open({path!r}, "rb") as f:
            f.read(1)
"""
    + _POLICY_TAIL
)

STAMP_READER = (
    """
import os

def make_policy(context):
    print("atime", os.stat({path!r}).st_atime_ns)
"""
    + _POLICY_TAIL
)


def _episode(tmp_path: Path, source: str) -> str:
    """What one episode's policy printed, evaluated by a host process of its own."""
    program = tmp_path / uuid.uuid4().hex
    program.mkdir()
    (program / "policy.py").write_text(source)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "evopolicy_mcp",
            "evaluate",
            str(program),
            "--task",
            "cartpole",
            "--episodes",
            "1",
            "--json",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    episode = json.loads(proc.stdout)["episode_summaries"][0]
    assert episode["status"] == "ok", episode
    return str(episode.get("stderr") or "")


@needs("syscalls")
def test_page_cache_residency_carries_nothing_from_one_episode_to_a_later_one(
    tmp_path: Path,
) -> None:
    seen = {}
    for bit in (0, 1, 0):
        _episode(tmp_path, CACHE_WRITER.format(path=str(CACHED), bit=bit))
        seen.setdefault(bit, []).append(_episode(tmp_path, CACHE_READER.format(path=str(CACHED))))
    assert seen[0][0] == seen[1][0] == seen[0][1], seen
    # Refused, not merely unchanged: EPERM from the filter for both probes.
    assert seen[1][0].split("\n")[:2] == [f"mincore errno {1}", f"nowait errno {1}"]


@needs("disk")
def test_access_times_of_runtime_files_carry_nothing_from_one_episode_to_a_later_one(
    tmp_path: Path,
) -> None:
    st = os.stat(STAMPED)
    seen = {}
    try:
        for bit in (0, 1):
            # An access time older than the modification: relatime updates it on a read.
            os.utime(STAMPED, ns=(st.st_mtime_ns - 10**10, st.st_mtime_ns))
            _episode(tmp_path, STAMP_WRITER.format(path=str(STAMPED), bit=bit))
            seen[bit] = _episode(tmp_path, STAMP_READER.format(path=str(STAMPED)))
    finally:
        os.utime(STAMPED, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert seen[0] == seen[1] == f"atime {st.st_mtime_ns - 10**10}\n", seen
