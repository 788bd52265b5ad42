"""Program versions of a run: their files from the snapshot store, and diffs between them."""

from __future__ import annotations

import base64
import difflib

from evopolicy_mcp.evaluation.snapshot import ProgramError, open_program
from evopolicy_mcp.store.database import Store

__all__ = ["DIFF_LINES", "file_entries", "program_diff", "program_files"]

DIFF_LINES = 2000  # a longer diff is cut, saying so


def program_files(store: Store, digest: str) -> dict[str, bytes]:
    """Relative path -> content of a snapshot; empty when it is gone from the store."""
    try:
        program = open_program(store.programs_dir, digest)
    except ProgramError:
        return {}
    return {name: (program.path / name).read_bytes() for name in program.files}


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def file_entries(files: dict[str, bytes]) -> list[dict[str, str]]:
    """Files as dataset entries: text where it is UTF-8, base64 otherwise."""
    out = []
    for path, data in sorted(files.items()):
        text = _text(data)
        if text is None:
            out.append(
                {"path": path, "text": base64.b64encode(data).decode(), "encoding": "base64"}
            )
        else:
            out.append({"path": path, "text": text, "encoding": "utf-8"})
    return out


def program_diff(old: dict[str, bytes], new: dict[str, bytes]) -> str:
    """A unified diff from ``old`` to ``new``, file by file ('' when they are the same)."""
    lines: list[str] = []
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        ta = _text(a) if a is not None else ""
        tb = _text(b) if b is not None else ""
        if ta is None or tb is None:
            lines.append(f"Binary file {path} differs\n")
            continue
        lines.extend(
            difflib.unified_diff(
                ta.splitlines(keepends=True),
                tb.splitlines(keepends=True),
                fromfile=f"a/{path}" if a is not None else "/dev/null",
                tofile=f"b/{path}" if b is not None else "/dev/null",
            )
        )
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"... {len(lines) - DIFF_LINES} more lines cut\n"]
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
