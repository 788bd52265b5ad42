"""program_dir under a root the operator names: opened once by fd, no symlink followed,
the records never copied, nothing outside the root probed."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from evopolicy_mcp.host.admission import capture_program
from evopolicy_mcp.host.authority import Host, HostError
from evopolicy_mcp.host.program_root import ProgramRoot
from tests.support.host import GOOD, SEED, rejected

_AT_FDCWD, _RENAME_EXCHANGE = -100, 2

# Swaps two paths atomically (renameat2 RENAME_EXCHANGE), over and over.
_SWAPPER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = (os.fsencode(p) for p in sys.argv[1:3])
print("ready", flush=True)
for _ in range(int(sys.argv[3])):
    if libc.renameat2(-100, a, -100, b, 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
    os.sched_yield()
"""


def _exchange(a: Path, b: Path) -> None:
    """Swap two paths atomically, here and now."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE):
        raise OSError(ctypes.get_errno(), "renameat2")


class _SwapOnceChecked(ProgramRoot):
    """A root that swaps the folder for a symlink right after the folder was opened and
    checked, before anything is copied: the window between check and copy that a
    capture by path has (a copy by path then follows the symlink)."""

    def __init__(self, root: Path, records: Path, swap: Callable[[], None]) -> None:
        super().__init__(root, records)
        self._swap = swap

    def open(self, program_dir: str) -> int:
        fd = super().open(program_dir)
        self._swap()
        return fd


def _program(directory: Path, extra: dict[str, str] | None = None) -> Path:
    directory.mkdir(parents=True)
    (directory / "policy.py").write_text(GOOD)
    for name, text in (extra or {}).items():
        (directory / name).write_text(text)
    return directory


def _capture(root: ProgramRoot, program_dir: str, programs: Path) -> tuple[str, ...] | str:
    """The captured file names, or the error text."""
    try:
        return capture_program(None, program_dir, programs_dir=programs, root=root).files
    except HostError as exc:
        return exc.message


def _swap_setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    """records; workspace/prog (a program); workspace/decoy, a symlink to a program
    outside the workspace holding a secret."""
    records = tmp_path / "records"
    records.mkdir()
    workspace = tmp_path / "workspace"
    _program(workspace / "prog")
    secret = _program(tmp_path / "elsewhere" / "prog", {"SECRET_TOKEN.txt": "hidden"})
    (workspace / "decoy").symlink_to(secret)
    return records, workspace / "prog", workspace / "decoy"


def test_swapping_program_dir_for_a_symlink_never_copies_what_it_points_to(
    tmp_path: Path,
) -> None:
    records, prog, decoy = _swap_setup(tmp_path)
    workspace = prog.parent
    programs = tmp_path / "programs"
    # Swapped before the open: the path is the symlink, and is refused as one.
    _exchange(prog, decoy)
    root = ProgramRoot(workspace, records)
    try:
        assert _capture(root, str(prog), programs) == (
            f"program_dir {str(prog)!r} goes through a symlink; give the real folder"
        )
    finally:
        root.close()
    _exchange(prog, decoy)
    # Swapped after the folder was opened and checked, before the copy: what was
    # checked is copied, not what the path names by then.
    root = _SwapOnceChecked(workspace, records, lambda: _exchange(prog, decoy))
    try:
        assert _capture(root, str(prog), programs) == ("policy.py",)
    finally:
        root.close()
    assert prog.is_symlink(), "the swap did not happen in the window"
    assert not any(p.name == "SECRET_TOKEN.txt" for p in programs.rglob("*"))


def test_a_folder_swapped_any_time_is_never_copied_through_the_symlink(tmp_path: Path) -> None:
    """Whatever the interleaving with a process swapping the folder and the symlink,
    a capture copies the folder or is refused; it holds for every interleaving, so
    this does not depend on which ones the scheduler gives."""
    records, prog, decoy = _swap_setup(tmp_path)
    swapper = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(prog), str(decoy), "1000000"],
        stdout=subprocess.PIPE,
        text=True,
    )
    root = ProgramRoot(prog.parent, records)
    outcomes: list[tuple[str, ...] | str] = []
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
        for _ in range(200):
            outcomes.append(_capture(root, str(prog), tmp_path / "programs"))
    finally:
        swapper.kill()
        swapper.wait(10)
        root.close()
    assert all(o == ("policy.py",) for o in outcomes if isinstance(o, tuple)), outcomes
    refused = [o for o in outcomes if isinstance(o, str)]
    assert all("SECRET_TOKEN" not in text and "elsewhere" not in text for text in refused)
    assert {text.split("' ", 1)[1] for text in refused} <= {
        "goes through a symlink; give the real folder",
        "does not exist; give the folder holding policy.py",
        "is not a folder; give the folder holding policy.py",  # swapped back meanwhile
    }


@pytest.mark.parametrize("given", ["outside", "missing", "dotdot", "relative-outside"])
def test_a_program_dir_outside_the_root_is_refused_from_its_text_alone(
    tmp_path: Path, given: str
) -> None:
    records = tmp_path / "records"
    records.mkdir()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    _program(tmp_path / "outside")
    program_dir = {
        "outside": str(tmp_path / "outside"),
        "missing": str(tmp_path / "missing"),
        "dotdot": str(workspace / ".." / "outside"),
        "relative-outside": "../outside",
    }[given]
    root = ProgramRoot(workspace, records)
    try:
        text = _capture(root, program_dir, tmp_path / "programs")
    finally:
        root.close()
    # The same answer whether or not the folder exists: nothing is probed.
    assert text == (
        f"program_dir {program_dir!r} is outside this server's program folder "
        f"{workspace.resolve()}; keep your program in a folder inside it"
    )


def test_program_dir_inside_the_root_relative_or_absolute_is_captured(tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir()
    workspace = tmp_path / "workspace"
    _program(workspace / "a" / "prog")
    (workspace / "a" / "link").symlink_to(workspace / "a" / "prog")
    root = ProgramRoot(workspace, records)
    try:
        assert _capture(root, "a/prog", tmp_path / "p") == ("policy.py",)
        assert _capture(root, str(workspace / "a" / "prog"), tmp_path / "p") == ("policy.py",)
        assert _capture(root, "a/./prog/", tmp_path / "p") == ("policy.py",)
        assert _capture(root, "a/link", tmp_path / "p") == (
            "program_dir 'a/link' goes through a symlink; give the real folder"
        )
        assert _capture(root, "a/prog/policy.py", tmp_path / "p") == (
            "program_dir 'a/prog/policy.py' is not a folder; give the folder holding policy.py"
        )
    finally:
        root.close()


def test_the_records_are_never_copied_even_inside_the_root(tmp_path: Path, tasks_dir: Path) -> None:
    data_dir = tmp_path / "data"
    with Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED, program_root=tmp_path) as h:
        run = h.start_run("mini").run_id
        overlap = "program_dir overlaps the server's records"
        for given in ("data", str(data_dir / "programs"), "data/runs"):
            assert overlap in rejected(lambda g=given: h.submit(run, "0", program_dir=g),
                                       "program_invalid").message  # fmt: skip
        # A folder whose copy would walk into the records (found by device and inode).
        error = rejected(lambda: h.submit(run, "0", program_dir=str(tmp_path)), "program_invalid")
        assert error.message.startswith("data is the server's records")
        assert str(data_dir) not in error.message
        assert h.run_status(run).episodes_used == 0
