"""program_dir under a root the operator names: opened once by fd, no symlink followed,
the records never copied, nothing outside the root probed."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from evopolicy_mcp.host.admission import capture_program
from evopolicy_mcp.host.authority import Host, HostError
from evopolicy_mcp.host.program_root import ProgramRoot
from tests.support.host import GOOD, SEED, rejected

# Swaps two paths atomically (renameat2 RENAME_EXCHANGE), over and over.
_SWAPPER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = (os.fsencode(p) for p in sys.argv[1:3])
print("ready", flush=True)
while True:
    if libc.renameat2(-100, a, -100, b, 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
    os.sched_yield()
"""


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


def test_swapping_program_dir_for_a_symlink_never_copies_what_it_points_to(
    tmp_path: Path,
) -> None:
    records = tmp_path / "records"
    records.mkdir()
    workspace = tmp_path / "workspace"
    _program(workspace / "prog")
    secret = _program(tmp_path / "elsewhere" / "prog", {"SECRET_TOKEN.txt": "hidden"})
    (workspace / "decoy").symlink_to(secret)
    swapper = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(workspace / "prog"), str(workspace / "decoy")],
        stdout=subprocess.PIPE,
        text=True,
    )
    root = ProgramRoot(workspace, records)
    outcomes: list[tuple[str, ...] | str] = []
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and len(outcomes) < 400:
            outcomes.append(_capture(root, str(workspace / "prog"), tmp_path / "programs"))
    finally:
        swapper.kill()
        swapper.wait(10)
        root.close()
    captured = [o for o in outcomes if isinstance(o, tuple)]
    refused = [o for o in outcomes if isinstance(o, str)]
    assert captured and refused, outcomes[:5]  # the swap was seen both ways
    assert all(files == ("policy.py",) for files in captured), captured
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
