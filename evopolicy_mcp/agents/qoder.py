"""Qoder: Claude Code's headless command line and ``.mcp.json``, in Qoder's spelling."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .base import home
from .claude import Claude

__all__ = ["PROVIDER", "Qoder"]


class Qoder(Claude):
    name = "qoder"
    executable = "qodercli"
    package = "npm install -g @qoder-ai/qodercli"
    env_allow: tuple[str, ...] = ("QODER_*",)
    verbose: tuple[str, ...] = ()
    permission = "bypass_permissions"
    effort_flag = "--reasoning-effort"

    def config_paths(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        return (home(env) / ".qoder", home(env) / ".qoder.json")

    def preflight(self, env: Mapping[str, str]) -> str | None:
        return None  # Qoder runs bypass_permissions as root


PROVIDER = Qoder()
