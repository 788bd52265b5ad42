"""The operator's skill: ``evopolicy-mcp`` as an agent skill (a folder with ``SKILL.md``
and reference pages loaded on demand) for the operator's own coding assistant, and
installing it where Claude Code and Codex look (``agent-config CLI --skill DIR``).

It is never for the agent under test: ``agent run`` puts nothing of it in a workspace.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

__all__ = ["SKILL_HOMES", "SKILL_NAME", "front_matter", "install_skill", "skill_source"]

SKILL_NAME = "evopolicy-mcp"
# Where each CLI looks under a project folder (or under the home folder, for every project).
SKILL_HOMES = {"claude": ".claude/skills", "codex": ".agents/skills"}


def skill_source() -> Path:
    """The skill's folder as the package ships it."""
    return Path(str(resources.files("evopolicy_mcp") / "skills" / SKILL_NAME))


def front_matter(text: str) -> dict[str, str]:
    """The ``key: value`` lines between a ``SKILL.md``'s opening and closing ``---``;
    ValueError when there are none."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise ValueError("SKILL.md must open with '---' front matter")
    out: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() == "---":
            return out
        key, sep, value = line.partition(":")
        if not sep or not key.strip():
            raise ValueError(f"front matter line is not 'key: value': {line[:80]!r}")
        out[key.strip()] = value.strip()
    raise ValueError("SKILL.md front matter has no closing '---'")


def install_skill(client: str, folder: Path) -> Path:
    """Copy the skill to ``folder/<the CLI's skills folder>/evopolicy-mcp`` (replacing an
    older copy) and return where it went."""
    if client not in SKILL_HOMES:
        raise ValueError(
            f"skills are installed for {', '.join(sorted(SKILL_HOMES))}, not {client!r}"
        )
    target = folder.expanduser().resolve() / SKILL_HOMES[client] / SKILL_NAME
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(skill_source(), target)
    return target
