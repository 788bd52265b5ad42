"""Package extras: which environment families are installed, found without importing them.

Each environment family is an optional extra of this package (``[box2d]``,
``[mujoco]``, ``[minigrid]``, ...). A task names its extra; whether the extra is
installed is read from this package's own metadata (the distributions each
extra requires) and the installed distributions' metadata, so listing tasks
imports no simulator. Where this package's metadata cannot be found (a source
tree on ``sys.path``), every extra counts as installed and a missing package
surfaces when the environment is made, with the same advice.
"""

from __future__ import annotations

import functools
import re
from importlib import metadata

__all__ = ["DISTRIBUTION", "declared_extras", "install_command", "missing_packages"]

DISTRIBUTION = "evopolicy-mcp"
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[([^\]]*)\])?")


@functools.cache
def _requirements() -> dict[str, list[tuple[str, list[str]]]] | None:
    """extra -> [(distribution, its extras)], from this package's Requires-Dist."""
    try:
        lines = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return None
    table: dict[str, list[tuple[str, list[str]]]] = {}
    for line in lines:
        requirement, _, marker = line.partition(";")
        found = _EXTRA.search(marker)
        named = _NAME.match(requirement)
        if found is None or named is None:
            continue
        wanted = [e.strip() for e in (named.group(3) or "").split(",") if e.strip()]
        table.setdefault(found.group(1), []).append((named.group(1), wanted))
    return table


def declared_extras() -> list[str] | None:
    """The extras this package declares (None when its metadata cannot be found)."""
    table = _requirements()
    return None if table is None else sorted(table)


@functools.cache
def _installed(name: str) -> bool:
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def missing_packages(extra: str) -> list[str]:
    """Distributions of ``extra`` that are not installed ([] when all are, or when this
    package's metadata cannot tell)."""
    table = _requirements()
    if table is None:
        return []
    missing: list[str] = []
    todo, done = [extra], set()
    while todo:
        current = todo.pop()
        if current in done:
            continue
        done.add(current)
        for name, nested in table.get(current, []):
            if re.sub(r"[-_.]+", "-", name).lower() == DISTRIBUTION:
                todo.extend(nested)  # [all] names the other extras
            elif not _installed(name) and name not in missing:
                missing.append(name)
    return missing


def install_command(extra: str) -> str:
    return f'pip install "{DISTRIBUTION}[{extra}]"'
