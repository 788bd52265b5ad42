from __future__ import annotations

import hashlib
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from evopolicy_mcp.evaluation import snapshot
from evopolicy_mcp.evaluation.snapshot import (
    Program,
    ProgramError,
    SnapshotLimits,
    capture,
    capture_files,
    open_program,
)

POLICY = (
    "def make_policy(context):\n"
    "    return Policy()\n"
    "\n\n"
    "class Policy:\n"
    "    def act(self, observation):\n"
    "        return 0\n"
)
HELPER = "def helper():\n    return 1\n"


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for relpath, content in files.items():
        target = root / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    return root


def make_source(tmp_path: Path, files: dict[str, str | bytes] | None = None) -> Path:
    return write_tree(tmp_path / "src", files or {"policy.py": POLICY, "helpers/util.py": HELPER})


def store_entries(store: Path) -> list[str]:
    return sorted(os.listdir(store)) if store.exists() else []


def test_same_content_gets_the_same_digest_from_a_directory_and_inline(tmp_path: Path) -> None:
    store = tmp_path / "store"
    from_dir = capture(make_source(tmp_path), store)
    inline = capture_files({"helpers/util.py": HELPER, "policy.py": POLICY}, store)
    assert from_dir == inline
    assert from_dir.files == ("helpers/util.py", "policy.py")
    assert from_dir.size == len(POLICY) + len(HELPER)
    assert from_dir.path == Path(os.path.abspath(store)) / from_dir.digest
    assert store_entries(store) == [from_dir.digest]


def test_digest_is_the_sha256_of_the_documented_manifest(tmp_path: Path) -> None:
    program = capture(make_source(tmp_path), tmp_path / "store")
    manifest = b""
    for relpath, content in sorted({"helpers/util.py": HELPER, "policy.py": POLICY}.items()):
        manifest += relpath.encode() + b"\0"
        manifest += hashlib.sha256(content.encode()).hexdigest().encode() + b"\n"
    assert program.digest == hashlib.sha256(manifest).hexdigest()


def test_a_changed_byte_or_a_renamed_file_changes_the_digest(tmp_path: Path) -> None:
    store = tmp_path / "store"
    base = capture_files({"policy.py": POLICY, "a.py": HELPER}, store)
    edited = capture_files({"policy.py": POLICY, "a.py": HELPER + " "}, store)
    renamed = capture_files({"policy.py": POLICY, "b.py": HELPER}, store)
    assert len({base.digest, edited.digest, renamed.digest}) == 3


def test_snapshot_files_and_folders_are_read_only(tmp_path: Path) -> None:
    program = capture(make_source(tmp_path), tmp_path / "store")
    assert stat.S_IMODE(os.stat(program.path).st_mode) == 0o555
    assert stat.S_IMODE(os.stat(program.path / "helpers").st_mode) == 0o555
    for relpath in program.files:
        assert stat.S_IMODE(os.stat(program.path / relpath).st_mode) == 0o444
    if os.geteuid() != 0:  # root ignores permission bits
        with pytest.raises(PermissionError):
            (program.path / "policy.py").write_text("x = 1\n")


def test_snapshot_is_a_copy_that_later_edits_of_the_source_do_not_change(tmp_path: Path) -> None:
    source = make_source(tmp_path)
    program = capture(source, tmp_path / "store")
    (source / "policy.py").write_text(POLICY + "# edited\n")
    assert (program.path / "policy.py").read_text() == POLICY
    assert capture(source, tmp_path / "store").digest != program.digest


def test_non_python_files_are_copied_byte_for_byte(tmp_path: Path) -> None:
    blob = bytes(range(256)) * 4
    source = make_source(tmp_path, {"policy.py": POLICY, "weights.bin": blob})
    program = capture(source, tmp_path / "store")
    assert (program.path / "weights.bin").read_bytes() == blob


def test_cache_and_git_files_are_left_out_of_the_program(tmp_path: Path) -> None:
    source = make_source(
        tmp_path,
        {
            "policy.py": POLICY,
            "helpers/util.py": HELPER,
            "__pycache__/policy.cpython-311.pyc": b"\x00junk",
            "helpers/__pycache__/util.cpython-311.pyc": b"\x00junk",
            "stale.pyc": b"\x00junk",
            ".git/config": "[core]\n",
        },
    )
    os.symlink("/etc", source / ".git" / "escape")  # never looked at: .git is skipped whole
    program = capture(source, tmp_path / "store")
    assert program.files == ("helpers/util.py", "policy.py")
    assert (
        program.digest
        == capture_files({"policy.py": POLICY, "helpers/util.py": HELPER}, tmp_path / "s2").digest
    )


def test_symlinked_file_is_rejected_with_its_path(tmp_path: Path) -> None:
    source = make_source(tmp_path)
    (tmp_path / "outside.py").write_text(HELPER)
    os.symlink(tmp_path / "outside.py", source / "helpers" / "x.py")
    with pytest.raises(ProgramError, match=r"symlink at helpers/x\.py; copy"):
        capture(source, tmp_path / "store")


def test_symlinked_folder_is_rejected_with_its_path(tmp_path: Path) -> None:
    source = make_source(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", source / "linked")
    with pytest.raises(ProgramError, match=r"symlink at linked;"):
        capture(source, tmp_path / "store")


def test_dangling_symlink_is_rejected(tmp_path: Path) -> None:
    source = make_source(tmp_path)
    os.symlink(tmp_path / "missing", source / "gone.py")
    with pytest.raises(ProgramError, match=r"symlink at gone\.py"):
        capture(source, tmp_path / "store")


def test_fifo_is_rejected_without_blocking(tmp_path: Path) -> None:
    source = make_source(tmp_path)
    os.mkfifo(source / "helpers" / "pipe")
    with pytest.raises(ProgramError, match=r"named pipe \(fifo\) at helpers/pipe; .*remove it"):
        capture(source, tmp_path / "store")


def test_a_symlink_swapped_in_after_the_scan_is_still_refused(tmp_path: Path) -> None:
    # The reader opens by name with O_NOFOLLOW, whatever the scan saw earlier.
    source = make_source(tmp_path)
    os.symlink(source / "policy.py", source / "swapped.py")
    os.mkfifo(source / "pipe")
    fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY)
    try:
        acc = snapshot._Accumulator(SnapshotLimits())
        with pytest.raises(ProgramError, match="symlink at swapped.py"):
            snapshot._read_file(fd, "swapped.py", "swapped.py", acc)
        with pytest.raises(ProgramError, match="fifo"):
            snapshot._read_file(fd, "pipe", "pipe", acc)
        os.mkdir(source / "real")
        os.symlink(source / "real", source / "dirlink")
        with pytest.raises(ProgramError, match="symlink at dirlink"):
            snapshot._walk_dir(fd, "dirlink", "dirlink", acc)
    finally:
        os.close(fd)


def test_too_many_files_is_rejected(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {"policy.py": POLICY}
    files.update({f"data/{i}.txt": "x" for i in range(4)})
    limits = SnapshotLimits(max_files=4)
    with pytest.raises(ProgramError, match="more than 4 files"):
        capture(make_source(tmp_path, files), tmp_path / "store", limits=limits)
    with pytest.raises(ProgramError, match="more than 4 files"):
        capture_files({k: str(v) for k, v in files.items()}, tmp_path / "store", limits=limits)


def test_too_large_file_is_rejected_with_its_path(tmp_path: Path) -> None:
    limits = SnapshotLimits(max_file_bytes=1000)
    source = make_source(tmp_path, {"policy.py": POLICY, "big.txt": b"x" * 1001})
    with pytest.raises(ProgramError, match=r"big\.txt is 1001 bytes; a file may hold at most 1000"):
        capture(source, tmp_path / "store", limits=limits)
    with pytest.raises(ProgramError, match=r"big\.txt is 1001 bytes"):
        capture_files({"policy.py": POLICY, "big.txt": "x" * 1001}, tmp_path / "s", limits=limits)
    fits = capture_files(
        {"policy.py": POLICY, "big.txt": "x" * 1000}, tmp_path / "s", limits=limits
    )
    assert "big.txt" in fits.files


def test_too_large_total_is_rejected(tmp_path: Path) -> None:
    limits = SnapshotLimits(max_file_bytes=1000, max_total_bytes=1500)
    files = {"policy.py": POLICY, "a.txt": "x" * 800, "b.txt": "y" * 800}
    with pytest.raises(ProgramError, match="over 1500 bytes in total"):
        capture(make_source(tmp_path, dict(files)), tmp_path / "store", limits=limits)
    with pytest.raises(ProgramError, match="over 1500 bytes in total"):
        capture_files(files, tmp_path / "store", limits=limits)


def test_too_deep_tree_is_rejected_and_the_limit_itself_is_allowed(tmp_path: Path) -> None:
    limits = SnapshotLimits(max_depth=3)
    ok = make_source(tmp_path, {"policy.py": POLICY, "a/b/c/x.py": HELPER})
    assert "a/b/c/x.py" in capture(ok, tmp_path / "store", limits=limits).files
    (ok / "a/b/c/d").mkdir()
    with pytest.raises(ProgramError, match=r"a/b/c/d/ is 4 folders deep; the limit is 3"):
        capture(ok, tmp_path / "store", limits=limits)
    with pytest.raises(ProgramError, match="4 folders deep"):
        capture_files({"policy.py": POLICY, "a/b/c/d/x.py": HELPER}, tmp_path / "s", limits=limits)


def test_missing_policy_py_is_rejected_and_says_what_to_add(tmp_path: Path) -> None:
    source = make_source(tmp_path, {"main.py": POLICY})
    # The message names no file that is there: over a network it would list a server folder.
    with pytest.raises(ProgramError, match=r"no policy\.py at its top; add policy\.py") as exc:
        capture(source, tmp_path / "store")
    assert "main.py" not in str(exc.value)
    with pytest.raises(ProgramError, match=r"no policy\.py"):
        capture_files({"sub/policy.py": POLICY}, tmp_path / "store")


def test_missing_source_folder_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ProgramError, match="does not exist"):
        capture(tmp_path / "nowhere", tmp_path / "store")
    (tmp_path / "file").write_text(POLICY)
    with pytest.raises(ProgramError, match="is not a folder"):
        capture(tmp_path / "file", tmp_path / "store")


def test_syntax_error_is_rejected_with_file_and_line(tmp_path: Path) -> None:
    broken = "import math\n\ndef make_policy(context)\n    return None\n"
    source = make_source(tmp_path, {"policy.py": broken})
    with pytest.raises(ProgramError, match=r"^policy\.py line 3: .*; fix it and submit again$"):
        capture(source, tmp_path / "store")
    with pytest.raises(ProgramError, match=r"^helpers/util\.py line 1: "):
        capture_files({"policy.py": POLICY, "helpers/util.py": "x = (\n"}, tmp_path / "store")


def test_a_failed_capture_leaves_nothing_in_the_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with pytest.raises(ProgramError):
        capture_files({"policy.py": "def (:\n"}, store)
    with pytest.raises(ProgramError):
        capture_files({"policy.py": POLICY, "../x.py": ""}, store)
    assert store_entries(store) == []
    program = capture_files({"policy.py": POLICY}, store)
    capture_files({"policy.py": POLICY}, store)
    assert store_entries(store) == [program.digest]


def test_capture_compiles_but_never_runs_the_program(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    source = f"open({str(marker)!r}, 'w').write('x')\n" + POLICY
    capture_files({"policy.py": source}, tmp_path / "store")
    assert not marker.exists()


def test_errors_do_not_reveal_the_store_path(tmp_path: Path) -> None:
    store = tmp_path / "private-store"
    for files in ({"policy.py": "def (:\n"}, {"x.py": HELPER}, {"/etc/passwd": ""}):
        with pytest.raises(ProgramError) as info:
            capture_files(files, store)
        assert "private-store" not in str(info.value)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("/etc/policy.py", "absolute path"),
        ("../policy.py", "escapes the program folder"),
        ("helpers/../../x.py", "escapes the program folder"),
        ("helpers\\x.py", "backslash"),
        ("x\0.py", "NUL"),
        ("", "empty name"),
        ("./", "names a folder"),
        (".", "names no file"),
        ("helpers/", "names a folder"),
        ("a\nb.py", "control character"),
        ("__pycache__/policy.cpython-311.pyc", "leave out"),
    ],
)
def test_inline_paths_that_escape_or_are_malformed_are_rejected(
    tmp_path: Path, name: str, expected: str
) -> None:
    with pytest.raises(ProgramError, match=expected):
        capture_files({"policy.py": POLICY, name: HELPER}, tmp_path / "store")


def test_inline_names_are_normalised_and_duplicates_after_that_are_rejected(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    program = capture_files({"./policy.py": POLICY, "helpers//util.py": HELPER}, store)
    assert program.files == ("helpers/util.py", "policy.py")
    with pytest.raises(ProgramError, match="both name policy.py; send each file once"):
        capture_files({"policy.py": POLICY, "./policy.py": POLICY}, store)


def test_inline_non_text_content_and_non_string_names_are_rejected(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with pytest.raises(ProgramError, match="content of policy.py is bytes, not text"):
        capture_files({"policy.py": b"x = 1\n"}, store)  # type: ignore[dict-item]
    with pytest.raises(ProgramError, match="file names must be strings, got int"):
        capture_files({"policy.py": POLICY, 3: HELPER}, store)  # type: ignore[dict-item]
    with pytest.raises(ProgramError, match="not valid Unicode"):
        capture_files({"policy.py": POLICY, "a.txt": "\udcff"}, store)
    with pytest.raises(ProgramError, match="must map relative paths"):
        capture_files([("policy.py", POLICY)], store)  # type: ignore[arg-type]


def test_inline_file_that_is_also_a_folder_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ProgramError, match="helpers is both a file and a folder"):
        capture_files({"policy.py": POLICY, "helpers": "", "helpers/x.py": ""}, tmp_path / "s")


def test_open_program_returns_the_same_program_after_a_restart(tmp_path: Path) -> None:
    store = tmp_path / "store"
    program = capture(make_source(tmp_path), store)
    assert open_program(store, program.digest) == program


def test_open_program_ignores_bytecode_a_policy_process_left_behind(tmp_path: Path) -> None:
    store = tmp_path / "store"
    program = capture(make_source(tmp_path), store)
    os.chmod(program.path, 0o755)
    (program.path / "__pycache__").mkdir()
    (program.path / "__pycache__" / "policy.cpython-311.pyc").write_bytes(b"\x00")
    assert open_program(store, program.digest) == program


def _make_writable(program: Program) -> None:
    for folder, _dirs, files in os.walk(program.path):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)


@pytest.mark.parametrize("tamper", ["edit", "add", "remove", "symlink"])
def test_open_program_detects_a_tampered_snapshot(tmp_path: Path, tamper: str) -> None:
    store = tmp_path / "store"
    program = capture(make_source(tmp_path), store)
    _make_writable(program)
    if tamper == "edit":
        (program.path / "helpers" / "util.py").write_text(HELPER + "x = 2\n")
    elif tamper == "add":
        (program.path / "extra.txt").write_text("x")
    elif tamper == "remove":
        (program.path / "helpers" / "util.py").unlink()
    else:
        (program.path / "helpers" / "util.py").unlink()
        os.symlink(tmp_path / "src" / "helpers" / "util.py", program.path / "helpers" / "util.py")
    with pytest.raises(ProgramError, match=f"program {program.digest} in the store"):
        open_program(store, program.digest)


def test_open_program_rejects_a_missing_or_malformed_digest(tmp_path: Path) -> None:
    store = tmp_path / "store"
    capture_files({"policy.py": POLICY}, store)
    with pytest.raises(ProgramError, match="no program"):
        open_program(store, "0" * 64)
    for bad in ("../etc", "ABC" * 21 + "D", "0" * 63, ".incoming-x"):
        with pytest.raises(ProgramError, match="not a program digest"):
            open_program(store, bad)


def test_concurrent_captures_of_one_program_share_one_snapshot(tmp_path: Path) -> None:
    store = tmp_path / "store"
    files = {"policy.py": POLICY, **{f"data/{i}.txt": str(i) * 1000 for i in range(20)}}
    with ThreadPoolExecutor(max_workers=8) as pool:
        programs = list(pool.map(lambda _: capture_files(files, store), range(16)))
    assert len({p.digest for p in programs}) == 1
    assert store_entries(store) == [programs[0].digest]
    assert open_program(store, programs[0].digest) == programs[0]


def test_a_python_source_over_the_compile_bound_is_rejected_before_compiling(
    tmp_path: Path,
) -> None:
    huge = "x = [" + "1," * 200_000 + "]\n"  # 400 kB: seconds and hundreds of MB to compile
    with pytest.raises(
        ProgramError, match=r"policy\.py is \d+ bytes; Python sources may be at most"
    ):
        capture_files({"policy.py": POLICY + huge}, tmp_path / "store")
    data = {"policy.py": POLICY, "weights.json": "[" + "1," * 200_000 + "1]"}
    assert capture_files(data, tmp_path / "store").files == ("policy.py", "weights.json")
