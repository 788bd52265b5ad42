"""What every provider shares: the common task, an invocation, the environment allowlist.

A provider turns one :class:`AgentTask` into one :class:`Invocation` of its CLI:
the command line, the files it reads (its MCP config) and the environment
variables it needs on top of the allowlist; it names the CLI's own config
home, which the agent's sandbox lets it read and write. It holds no run rules; the
launcher (:mod:`.launch`) creates the run, starts and stops the process and
writes the records, the same way for every provider.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from evopolicy_mcp.agents.config import SERVER_NAME, Launch, Remote

__all__ = [
    "BASE_ENV",
    "home",
    "SERVER_NAME",
    "AgentTask",
    "Invocation",
    "Provider",
    "Unsupported",
    "allowed_env",
]

# What any program needs to run and reach the network: no credentials of the operator.
BASE_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TMPDIR",
    "TERM",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)


class Unsupported(ValueError):
    """The request cannot be expressed for this CLI (an option it lacks, a refused mode)."""


@dataclass(frozen=True)
class AgentTask:
    """One agent session, provider-neutral."""

    task_id: str
    run_id: str
    workspace: Path  # the agent's working directory; holds program/ and TASK.md
    state_dir: Path  # the session's own directory in the workspace (a CLI home if needed)
    prompt: str
    server: Launch | Remote  # the run's server: started by the CLI, or reached over HTTP
    model: str | None = None
    effort: str | None = None


@dataclass(frozen=True)
class Invocation:
    """One CLI launch: run ``argv`` in the workspace with these files and variables."""

    argv: tuple[str, ...]
    files: Mapping[Path, str] = field(default_factory=dict)  # absolute path -> text
    env: Mapping[str, str] = field(default_factory=dict)  # set on top of the allowlist
    # new directory -> existing one: the new one gets a symlink to each entry of the
    # existing one that ``files`` does not write (a CLI home with our config in it)
    overlays: Mapping[Path, Path] = field(default_factory=dict)


class Provider(Protocol):
    """One agent CLI. See the modules beside this one."""

    name: str
    executable: str
    package: str  # where the CLI comes from, for the message when it is missing
    env_allow: tuple[str, ...]  # the CLI's own auth and config-home variables

    def invocation(self, task: AgentTask, env: Mapping[str, str]) -> Invocation:
        """The launch for ``task``; ``env`` is the allowlisted environment it runs in."""
        ...

    def config_paths(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        """The CLI's own config files and directories (login, settings, its logs)."""
        ...

    def preflight(self, env: Mapping[str, str]) -> str | None:
        """Why this CLI cannot run headless with ``env``, or None."""
        ...


def _allowed(name: str, patterns: tuple[str, ...]) -> bool:
    return any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in patterns)


def allowed_env(
    provider: Provider, source: Mapping[str, str] | None = None, extra: tuple[str, ...] = ()
) -> dict[str, str]:
    """The operator's variables that ``provider`` may see: :data:`BASE_ENV`, the CLI's
    own (``env_allow``) and those the operator names in ``extra``; nothing else."""
    source = os.environ if source is None else source
    patterns = (*BASE_ENV, *provider.env_allow, *extra)
    return {k: v for k, v in source.items() if _allowed(k, patterns)}


def home(env: Mapping[str, str]) -> Path:
    """The home directory the CLI will see."""
    return Path(env.get("HOME") or os.path.expanduser("~"))
