"""Qoder: Claude Code's headless command line and ``.mcp.json``, in Qoder's spelling."""

from __future__ import annotations

from collections.abc import Mapping

from .claude import Claude

__all__ = ["PROVIDER", "Qoder"]


class Qoder(Claude):
    name = "qoder"
    executable = "qodercli"
    env_allow: tuple[str, ...] = ("QODER_*",)
    verbose: tuple[str, ...] = ()
    permission = "bypass_permissions"
    effort_flag = "--reasoning-effort"

    def preflight(self, env: Mapping[str, str]) -> str | None:
        return None  # Qoder runs bypass_permissions as root


PROVIDER = Qoder()
