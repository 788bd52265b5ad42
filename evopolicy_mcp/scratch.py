"""A policy process's scratch directory: its copy of the program, and its removal.

Used by the template (:mod:`evopolicy_mcp.zygote`), which never reads a
program's bytes itself: they move inside the kernel.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from evopolicy_mcp import linux

__all__ = ["copy_program", "remove_scratch", "warm_copy"]


def copy_program(source: str, target: str) -> None:
    """Contents only, no modes or times (the sandbox already forbids changing them).

    The bytes move inside the kernel (sendfile, which unlike copy_file_range
    crosses filesystems: the target is on the scratch tmpfs): a program's
    content never passes through this process's memory, which later forks
    inherit."""
    for directory, subdirs, files in os.walk(source):
        here = os.path.join(target, os.path.relpath(directory, source))
        os.makedirs(here, exist_ok=True)
        subdirs.sort()
        for name in files:
            src = os.open(os.path.join(directory, name), os.O_RDONLY | os.O_CLOEXEC)
            try:
                dst = os.open(
                    os.path.join(here, name),
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                    0o600,
                )
                try:
                    while os.sendfile(dst, src, None, 1 << 30):
                        pass
                finally:
                    os.close(dst)
            finally:
                os.close(src)


def remove_scratch(path: str, mounted: bool) -> None:
    if mounted:
        try:
            linux.unmount(path)  # frees the whole tmpfs at once
        except OSError:
            pass
    shutil.rmtree(path, ignore_errors=True)


def warm_copy() -> None:
    """Run copy_program once here, so its code paths are warm in every fork."""
    with tempfile.TemporaryDirectory(prefix="evopolicy-warm-") as tmp:
        source = os.path.join(tmp, "a")
        os.mkdir(source)
        with open(os.path.join(source, "policy.py"), "w") as f:
            f.write("pass\n")
        copy_program(source, os.path.join(tmp, "b"))
